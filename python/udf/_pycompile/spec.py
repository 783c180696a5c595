"""The declaration of a Python metric: element / accumulator types, captures, metadata.

Everything here is plain Python (no numba): it validates what the user declared, in the
same terms as udfc (`--elem`, `--acc`, `--capture NAME:TYPE[]`, ...) and the ABI header
include/udf/abi/metric_v1.h.
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


def capture_offset(index: int) -> int:
    return 16 + 8 * index


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
            if short is None:
                raise ValueError(f"capture {name!r}: numpy dtype {dtype} is not a capture type "
                                 f"(float32, float16, int32, uint8)")
            is_array = getattr(value, "ndim", 0) > 0
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
    """

    symbol: str
    elem: str = "f32"
    acc: str | None = None
    captures: tuple[CaptureSpec, ...] = ()
    finalize_symbol: str | None = None
    order: str = "min"
    initial: float = 0.0
    coarse_metric: str = "l2"
    extra: dict = field(default_factory=dict, compare=False, repr=False)

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
        initial = float(self.initial)
        if math.isnan(initial):
            raise ValueError("initial must not be NaN")
        if acc == "i32" and (math.isinf(initial) or initial != int(initial)
                             or not -2**31 <= initial < 2**31):
            raise ValueError(f"initial {self.initial!r}: the i32 accumulator needs an integer in int32 range")
        object.__setattr__(self, "initial", initial)

    def udfc_flags(self) -> list[str]:
        """udfc's metadata flags for this metric (everything but INPUT, -o and --arch)."""
        flags = ["--symbol", self.symbol]
        if self.finalize_symbol:
            flags += ["--finalize", self.finalize_symbol]
        flags += ["--elem", self.elem, "--acc", self.acc, "--order", self.order,
                  "--initial", _format_initial(self.initial, self.acc),
                  "--coarse-metric", self.coarse_metric]
        for c in self.captures:
            flags += ["--capture", f"{c.name}:{c.udfc_type}"]
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

    def udfc_flags(self) -> list[str]:
        """udfc's flags for this filter (everything but INPUT, -o and --arch)."""
        flags = ["--kind", "filter", "--symbol", self.symbol]
        for c in self.captures:
            flags += ["--capture", f"{c.name}:{c.udfc_type}"]
        return flags

    def describe_captures(self) -> str:
        return ", ".join(str(c) for c in self.captures) if self.captures else "(none)"
