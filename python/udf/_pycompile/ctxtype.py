"""The per-metric numba type of `ctx` (a `const udf_ctx_v1 *`), shared by both back ends.

Each back end has its own copy of numba's type system, so the class is made once per
`types` module.  An instance carries the capture declarations and is named after them
(`UdfCtxV1(weights: f32[], p: f32)`): metrics with different captures get different
types, metrics with the same captures share one.  Its data model is a plain pointer, so
the C ABI argument is a pointer, as in the header.

What `ctx.NAME` gives in the function:
    ctx.dim, ctx.n_dims   int64   (the u32 fields, zero-extended: Python int semantics)
    array capture         CPointer(float32 | float16 | int32 | uint8), indexable: ctx.w[ctx.dim]
    scalar capture        float32 | int32
"""
from __future__ import annotations

from dataclasses import dataclass

from .spec import CTX_FIELDS, CTX_OFFSETS, CaptureSpec, capture_offset

_ELEM_NAMES = {"f32": "float32", "f16": "float16", "i32": "int32", "u8": "uint8"}


@dataclass(frozen=True)
class FieldInfo:
    offset: int
    kind: str  # "u32" (dim, n_dims), "ptr" (array capture), "f32" / "i32" (scalar capture)
    elem: str | None  # array element dtype (f32 f16 i32 u8)


def field_info(captures: tuple[CaptureSpec, ...], attr: str) -> FieldInfo | None:
    if attr in CTX_FIELDS:
        return FieldInfo(CTX_OFFSETS[attr], "u32", None)
    for i, c in enumerate(captures):
        if c.name == attr:
            if c.is_array:
                return FieldInfo(capture_offset(i), "ptr", c.dtype)
            return FieldInfo(capture_offset(i), c.dtype, None)
    return None


def numba_field_type(types_mod, info: FieldInfo):
    if info.kind == "u32":
        return types_mod.int64
    if info.kind == "ptr":
        return types_mod.CPointer(getattr(types_mod, _ELEM_NAMES[info.elem]))
    return getattr(types_mod, _ELEM_NAMES[info.kind])


_classes: dict[int, type] = {}


def ctx_type_class(types_mod) -> type:
    """The UdfCtxV1Type class for this copy of numba's types (one per back end)."""
    cls = _classes.get(id(types_mod))
    if cls is None:
        class UdfCtxV1Type(types_mod.Type):
            """`const udf_ctx_v1 *` with typed, named capture fields."""

            def __init__(self, captures: tuple[CaptureSpec, ...]):
                self.captures = tuple(captures)
                name = "UdfCtxV1(" + ", ".join(f"{c.name}: {c.udfc_type}" for c in self.captures) + ")"
                super().__init__(name=name)

            def field(self, attr: str) -> FieldInfo | None:
                return field_info(self.captures, attr)

        cls = _classes[id(types_mod)] = UdfCtxV1Type
    return cls
