"""The declaration of a Python metric: element / accumulator types, captures, metadata.

Everything here is plain Python (no numba): it validates what the user declared, in the
same terms as udfc (`--elem`, `--acc`, `--capture NAME:TYPE[]`, `--abi`, `--shape`, ...) and
the ABI headers include/udf/abi/metric_v1.h and metric_v2.h.
"""
from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

ELEM_TYPES = ("f32", "f16", "i8", "u8")
ACC_TYPES = ("f32", "i32")
#: accumulator types allowed per element type; the first one is the default
ACC_FOR_ELEM = {"f32": ("f32",), "f16": ("f32",), "i8": ("i32", "f32"), "u8": ("i32", "f32")}
ARRAY_DTYPES = ("f32", "f16", "i32", "u8")
SCALAR_DTYPES = ("f32", "i32")
MAX_CAPTURES = 8  # UDF_ABI_METRIC_V1_MAX_CAPTURES
ORDERS = ("min", "max")
COARSE_METRICS = ("l2", "inner_product", "cosine")
#: archs udfc / udf-link accept (TOOLCHAIN-FACTS: NVRTC's list for CUDA 13.0)
SUPPORTED_ARCHS = (75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121)
#: names of udf_ctx_v1 fields; a capture may not shadow them
CTX_FIELDS = ("dim", "n_dims")
_RESERVED_CAPTURE_NAMES = set(CTX_FIELDS) | {"n_captures", "reserved", "captures"}

# ctx layout (udf_ctx_v1): u32 dim @0, u32 n_dims @4, u32 n_captures @8, u32 reserved @12,
# then 8-byte capture slots @16 + 8 * i (array: device pointer; scalar: f32/i32 in the low 4 bytes)
CTX_OFFSETS = {"dim": 0, "n_dims": 4, "n_captures": 8}
CTX_SIZE = 80

#: metric ABI versions (udfc --abi) and the ABI v2 shapes (udfc --shape)
ABIS = ("v1", "v2")
SHAPES = ("state", "vector")
ABI_IDS = {"v1": "ivf_flat.metric.v1", "v2": "ivf_flat.metric.v2"}
STATE_WORDS = 8  # UDF_ABI_METRIC_V2_STATE_WORDS
#: names of udf_ctx_v2 fields readable as ctx.NAME; a v2 metric's capture may not shadow them
CTX_FIELDS_V2 = ("dim", "n_dims", "query", "id")
# ctx layout (udf_ctx_v2): u32 dim @0, u32 n_dims @4, u32 query @8, u32 n_captures @12,
# i64 id @16, then 8-byte capture slots @24 + 8 * i
CTX_V2_OFFSETS = {"dim": 0, "n_dims": 4, "query": 8, "n_captures": 12, "id": 16}
CTX_V2_SIZE = 88


def capture_offset(index: int, abi: str = "v1") -> int:
    return (24 if abi == "v2" else 16) + 8 * index


def ctx_fields(abi: str = "v1") -> tuple[str, ...]:
    """The built-in fields of the ctx of `abi` ("v1": dim, n_dims; "v2": dim, n_dims, query, id)."""
    return CTX_FIELDS_V2 if abi == "v2" else CTX_FIELDS


_NUMPY_DTYPE_NAMES = {"float32": "f32", "float16": "f16", "int32": "i32", "uint8": "u8"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class CaptureSpec:
    """One capture: `name`, `dtype` (f32 f16 i32 u8 for arrays; f32 i32 for scalars), `is_array`."""

    name: str
    dtype: str
    is_array: bool

    def __post_init__(self):
        if not isinstance(self.name, str) or not _IDENT.match(self.name) or keyword.iskeyword(self.name):
            raise ValueError(f"capture name {self.name!r} is not a Python identifier")
        if self.name in _RESERVED_CAPTURE_NAMES:
            raise ValueError(f"capture name {self.name!r} is reserved: ctx.{self.name} is a field of udf_ctx_v1")
        allowed = ARRAY_DTYPES if self.is_array else SCALAR_DTYPES
        if self.dtype not in allowed:
            kind = "array" if self.is_array else "scalar"
            extra = "" if self.is_array else " (f16 and u8 only as arrays, e.g. 'f16[]')"
            raise ValueError(f"capture {self.name!r}: {kind} dtype {self.dtype!r} is not one of "
                             f"{', '.join(allowed)}{extra}")

    @property
    def udfc_type(self) -> str:
        """`f32[]` or `f32`, as in `udfc --capture NAME:TYPE`."""
        return self.dtype + ("[]" if self.is_array else "")

    def __str__(self) -> str:
        return f"{self.name} ({self.udfc_type})"

    @classmethod
    def parse(cls, name: str, value: Any) -> "CaptureSpec":
        """A capture from the decorator's `captures={name: value}` form.

        value: "f32[]" / "f16[]" / "i32[]" / "u8[]" (arrays), "f32" / "i32" (scalars), an
        existing CaptureSpec, a numpy array (an array capture of its dtype), a numpy scalar
        (np.float32 / np.int32), a Python float (f32) or int (i32).
        """
        if isinstance(value, CaptureSpec):
            if value.name != name:
                value = cls(name, value.dtype, value.is_array)
            return value
        if isinstance(value, str):
            text = value.strip()
            is_array = text.endswith("[]")
            return cls(name, text[:-2] if is_array else text, is_array)
        if isinstance(value, bool):
            raise ValueError(f"capture {name!r}: bool is not a capture type")
        if isinstance(value, int):
            return cls(name, "i32", False)
        if isinstance(value, float):
            return cls(name, "f32", False)
        dtype = getattr(value, "dtype", None)
        if dtype is not None:
            short = _NUMPY_DTYPE_NAMES.get(str(dtype))
            is_array = getattr(value, "ndim", 0) > 0
            if short is None:
                fix = "" if is_array else ": pass int(value) for an i32 scalar or float(value) for an f32 one"
                raise ValueError(f"capture {name!r}: numpy dtype {dtype} is not a capture type "
                                 f"(float32, float16, int32, uint8){fix}")
            return cls(name, short, is_array)
        raise ValueError(f"capture {name!r}: cannot derive a capture type from {type(value).__name__}")


def parse_captures(captures: Iterable[CaptureSpec] | Mapping[str, Any] | None) -> tuple[CaptureSpec, ...]:
    """Normalise `captures` (a list of CaptureSpec, or a {name: spec-or-value} mapping; order kept)."""
    if captures is None:
        return ()
    if isinstance(captures, Mapping):
        out = tuple(CaptureSpec.parse(n, v) for n, v in captures.items())
    else:
        out = []
        for c in captures:
            if isinstance(c, CaptureSpec):
                out.append(c)
            elif isinstance(c, (tuple, list)) and len(c) == 3:
                out.append(CaptureSpec(*c))
            elif isinstance(c, (tuple, list)) and len(c) == 2:
                out.append(CaptureSpec.parse(*c))
            else:
                raise ValueError(f"bad capture {c!r}: expected CaptureSpec(name, dtype, is_array)")
        out = tuple(out)
    if len(out) > MAX_CAPTURES:
        raise ValueError(f"{len(out)} captures declared; the ABI allows at most {MAX_CAPTURES}")
    seen = set()
    for c in out:
        if c.name in seen:
            raise ValueError(f"capture {c.name!r} is declared twice")
        seen.add(c.name)
    return out


def parse_arch(arch: int | str) -> int:
    """80, "80", "sm_80", "compute_80" -> 80 (must be one of SUPPORTED_ARCHS)."""
    if isinstance(arch, bool):
        raise ValueError(f"bad arch {arch!r}")
    if isinstance(arch, int):
        value = arch
    elif isinstance(arch, str):
        m = re.fullmatch(r"(?:sm_|compute_)?(\d+)", arch.strip())
        if not m:
            raise ValueError(f"bad arch {arch!r}: expected e.g. 90, 'sm_90' or 'compute_90'")
        value = int(m.group(1))
    else:
        raise ValueError(f"bad arch {arch!r}")
    if value not in SUPPORTED_ARCHS:
        raise ValueError(f"arch sm_{value} is not supported; supported: "
                         + " ".join(f"sm_{a}" for a in SUPPORTED_ARCHS))
    return value


def parse_archs(archs: Iterable[int | str] | int | str) -> tuple[int, ...]:
    if isinstance(archs, (int, str)):
        archs = [archs]
    out = sorted({parse_arch(a) for a in archs})
    if not out:
        raise ValueError("no arch given")
    return tuple(out)


def check_symbol(name: str, what: str = "symbol") -> str:
    if not isinstance(name, str) or not _IDENT.match(name):
        raise ValueError(f"{what} {name!r} is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)")
    return name


def _format_initial(value: float, acc: str) -> str:
    if acc == "i32":
        return str(int(value))
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def _check_initial(value, acc: str, what: str = "initial") -> float:
    """One initial value as a float (NaN rejected; an int32-range integer for acc i32)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise ValueError(f"{what} {value!r} is not a number")
    v = float(value)
    if math.isnan(v):
        raise ValueError(f"{what} must not be NaN")
    if acc == "i32" and (math.isinf(v) or v != int(v) or not -2**31 <= v < 2**31):
        raise ValueError(f"{what} {value!r}: the i32 accumulator needs an integer in int32 range")
    return v


def _state_initial(initial, acc: str) -> tuple[float, ...]:
    """The ABI v2 state's initial words: None -> (), a number -> (number,), a sequence of at most
    STATE_WORDS numbers -> a tuple of floats (validated for acc)."""
    if initial is None:
        return ()
    if isinstance(initial, str):
        raise ValueError(f"initial {initial!r}: give the state's first words as numbers, e.g. initial=[0.0, 1.0]")
    try:
        values = list(initial)
    except TypeError:
        values = [initial]
    if len(values) > STATE_WORDS:
        raise ValueError(f"initial has {len(values)} values; the ABI v2 state has {STATE_WORDS} words")
    return tuple(_check_initial(v, acc, f"initial[{i}]") for i, v in enumerate(values))


class _CaptureLookup:
    """capture_names / capture(name) over a spec's `captures` (MetricSpec, FilterSpec)."""

    @property
    def capture_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.captures)

    def capture(self, name: str) -> CaptureSpec | None:
        for c in self.captures:
            if c.name == name:
                return c
        return None


@dataclass(frozen=True)
class MetricSpec(_CaptureLookup):
    """What a metric declares besides its code (udfc's metadata flags).

    `symbol` is the C name of the metric in the LTO-IR (`--symbol`), `finalize_symbol` the
    finalize function's (`--finalize`, None without one).  order / initial / coarse_metric
    do not change the code; they are kept so `udfc_flags()` can give the full command line.

    `abi` is "v1" (ivf_flat.metric.v1: `ACC f(x, y, acc, ctx)`, the default) or "v2"
    (ivf_flat.metric.v2); `shape` (ABI v2 only, and implying it) is "state" (`void update(x, y,
    s, ctx)` + `float finalize(s, ctx)`, which is then required) or "vector" (`float
    distance(x, y, n_dims, ctx)`, no finalize); None with abi "v2" leaves the shape to udfc
    (inferred from the signature).  `initial` is the accumulator's start value (v1: a number,
    default 0.0) or the state's first words (v2: a tuple of at most 8 numbers, default (); a
    single number is the first word); the vector shape has none.

    `monotone` (ABI v1 only, `--monotone`) is the user's promise that the key only moves away
    from the best as coordinates fold: with order "min" the metric never returns less than
    acc, with "max" never more, for every input, and the finalize (if any) is
    non-decreasing.  A scan may then stop folding a vector once its partial value is worse
    than the query's current k-th best (the same results, less work); declared for a metric
    that is not monotone (an inner product, a negative weight) it gives wrong results.

    `coarse_weights` (`--coarse-weights`) names the f32 array capture (one weight a dimension)
    whose value an index build uses as its coarse weights: k-means, the assignment and the
    coarse probe then work on the rows scaled by sqrt(w), where a weighted metric's queries find
    their lists.  The coarse metric must be l2 or inner_product; with captures declared here it
    must name one of them (without, udfc checks it against the captures it compiles with).
    """

    symbol: str
    elem: str = "f32"
    acc: str | None = None
    captures: tuple[CaptureSpec, ...] = ()
    finalize_symbol: str | None = None
    order: str = "min"
    initial: Any = None
    coarse_metric: str = "l2"
    extra: dict = field(default_factory=dict, compare=False, repr=False)
    abi: str | None = None
    shape: str | None = None
    monotone: bool = False
    coarse_weights: str | None = None

    def __post_init__(self):
        check_symbol(self.symbol, "metric symbol")
        if self.elem not in ELEM_TYPES:
            raise ValueError(f"elem {self.elem!r} is not one of {', '.join(ELEM_TYPES)}")
        acc = self.acc if self.acc is not None else ACC_FOR_ELEM[self.elem][0]
        if acc not in ACC_FOR_ELEM[self.elem]:
            raise ValueError(f"acc {acc!r} is not allowed with elem {self.elem!r} "
                             f"(allowed: {', '.join(ACC_FOR_ELEM[self.elem])})")
        object.__setattr__(self, "acc", acc)
        object.__setattr__(self, "captures", parse_captures(self.captures))
        if self.finalize_symbol is not None:
            check_symbol(self.finalize_symbol, "finalize symbol")
            if self.finalize_symbol == self.symbol:
                raise ValueError(f"the finalize symbol must differ from the metric symbol ({self.symbol!r})")
        if self.order not in ORDERS:
            raise ValueError(f"order {self.order!r} is not one of {', '.join(ORDERS)}")
        if self.coarse_metric not in COARSE_METRICS:
            raise ValueError(f"coarse_metric {self.coarse_metric!r} is not one of {', '.join(COARSE_METRICS)}")
        shape = self.shape
        if shape is not None and shape not in SHAPES:
            raise ValueError(f"shape {shape!r} is not one of {', '.join(SHAPES)} (ABI v2)")
        abi = self.abi if self.abi is not None else ("v2" if shape is not None else "v1")
        if abi not in ABIS:
            raise ValueError(f"abi {abi!r} is not one of {', '.join(ABIS)}")
        if abi == "v1" and shape is not None:
            raise ValueError(f"shape={shape!r} is an ABI v2 shape; it cannot be used with abi='v1'")
        object.__setattr__(self, "abi", abi)
        if not isinstance(self.monotone, bool):
            raise ValueError(f"monotone {self.monotone!r} is not a bool (True or False)")
        if self.monotone and abi == "v2":
            raise ValueError("monotone=True applies to ABI v1 metrics only, not to an ABI v2 metric (abi='v2' / "
                             "shape=...): only a v1 accumulator can be stopped early")
        self._check_coarse_weights()
        if abi == "v1":
            if isinstance(self.initial, (list, tuple)):
                raise ValueError(f"initial {self.initial!r}: an ABI v1 metric has one accumulator, so one "
                                 "number (a list of values is the ABI v2 state's, shape='state')")
            initial = _check_initial(0.0 if self.initial is None else self.initial, acc)
        else:
            for c in self.captures:
                if c.name in CTX_FIELDS_V2:
                    raise ValueError(f"capture name {c.name!r} is reserved: ctx.{c.name} is a field of udf_ctx_v2")
            if shape == "vector":
                if self.finalize_symbol is not None:
                    raise ValueError("the ABI v2 vector shape has no finalize function: distance(x, y, n_dims, "
                                     "ctx) returns the distance itself (finalize is for shape='state')")
                if self.initial is not None and _state_initial(self.initial, acc):
                    raise ValueError("the ABI v2 vector shape has no state, so no initial values (initial is "
                                     "for shape='state')")
            if shape == "state" and self.finalize_symbol is None:
                raise ValueError("the ABI v2 state shape needs a finalize function: float finalize(s, ctx) "
                                 "turns the state into the distance")
            initial = _state_initial(self.initial, acc)
        object.__setattr__(self, "initial", initial)

    def _check_coarse_weights(self) -> None:
        name = self.coarse_weights
        if name is None:
            return
        if not isinstance(name, str):
            raise ValueError(f"coarse_weights {name!r} is not a capture's name (a str)")
        if self.coarse_metric == "cosine":
            raise ValueError("coarse_weights need an l2 or inner_product coarse metric; cosine normalizes the rows")
        if not self.captures:
            return  # declared elsewhere (a CUDA source's first line): udfc checks the name
        c = self.capture(name)
        if c is None:
            raise ValueError(f"coarse_weights names capture {name!r}, which is not declared "
                             f"(captures: {self.describe_captures()})")
        if not c.is_array or c.dtype != "f32":
            raise ValueError(f"coarse_weights: capture {c} is not an f32 array; coarse weights are one f32 "
                             "a dimension (e.g. captures={'w': 'f32[]'} or a float32 array)")

    @property
    def ctx_fields(self) -> tuple[str, ...]:
        """The ctx's built-in fields (v1: dim, n_dims; v2: dim, n_dims, query, id)."""
        return ctx_fields(self.abi)

    @property
    def role(self) -> str:
        """The main function's role: "metric" (v1), "update" (v2 state), "distance" (v2 vector), or
        "v2" (ABI v2, shape left to udfc)."""
        if self.abi == "v1":
            return "metric"
        return {"state": "update", "vector": "distance"}.get(self.shape, "v2")

    def udfc_flags(self) -> list[str]:
        """udfc's metadata flags for this metric (everything but INPUT, -o and --arch)."""
        flags = []
        if self.abi == "v2":
            flags += ["--abi", "v2"]
            if self.shape is not None:
                flags += ["--shape", self.shape]
        flags += ["--symbol", self.symbol]
        if self.finalize_symbol:
            flags += ["--finalize", self.finalize_symbol]
        flags += ["--elem", self.elem, "--acc", self.acc, "--order", self.order]
        if self.abi == "v1":
            flags += ["--initial", _format_initial(self.initial, self.acc)]
        elif self.initial:
            flags += ["--initial", ",".join(_format_initial(v, self.acc) for v in self.initial)]
        flags += ["--coarse-metric", self.coarse_metric]
        for c in self.captures:
            flags += ["--capture", f"{c.name}:{c.udfc_type}"]
        if self.coarse_weights is not None:
            flags += ["--coarse-weights", self.coarse_weights]
        if self.monotone:
            flags += ["--monotone"]  # the one flag without a value
        return flags

    def describe_captures(self) -> str:
        return ", ".join(str(c) for c in self.captures) if self.captures else "(none)"


@dataclass(frozen=True)
class FilterSpec(_CaptureLookup):
    """What a filter declares besides its code (ABI ivf_flat.filter.v1): its C symbol and its
    captures (the same types as a metric's; arrays of any length, indexed as the filter likes).

    `udfc_flags()` gives `--kind filter --symbol NAME --capture ...`.
    """

    symbol: str
    captures: tuple[CaptureSpec, ...] = ()
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    kind = "filter"

    def __post_init__(self):
        check_symbol(self.symbol, "filter symbol")
        object.__setattr__(self, "captures", parse_captures(self.captures))

    ctx_fields = CTX_FIELDS
    abi = "v1"

    def udfc_flags(self) -> list[str]:
        """udfc's flags for this filter (everything but INPUT, -o and --arch)."""
        flags = ["--kind", "filter", "--symbol", self.symbol]
        for c in self.captures:
            flags += ["--capture", f"{c.name}:{c.udfc_type}"]
        return flags

    def describe_captures(self) -> str:
        return ", ".join(str(c) for c in self.captures) if self.captures else "(none)"
