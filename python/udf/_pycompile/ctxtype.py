"""The per-metric numba type of `ctx` (a `const udf_ctx_v1 *` or `const udf_ctx_v2 *`),
shared by both back ends.

Each back end has its own copy of numba's type system, so the class is made once per
`types` module.  An instance carries the ABI ("v1" or "v2": the two ctx layouts) and the
capture declarations and is named after them (`UdfCtxV1(weights: f32[], p: f32)`,
`UdfCtxV2(...)`): metrics with different captures get different types, metrics with the
same captures share one.  Its data model is a plain pointer, so the C ABI argument is a
pointer, as in the header.

What `ctx.NAME` gives in the function:
    ctx.dim, ctx.n_dims   int64   (the u32 fields, zero-extended: Python int semantics)
    ctx.query             int64   (v2 only: the query's row in the batch, u32 zero-extended)
    ctx.id                int64   (v2 only: the stored vector's id)
    array capture         CPointer(float32 | float16 | int32 | uint8), indexable: ctx.w[ctx.dim]
    scalar capture        float32 | int32
"""
from __future__ import annotations

from dataclasses import dataclass

from .spec import CTX_OFFSETS, CTX_V2_OFFSETS, CaptureSpec, capture_offset, ctx_fields

_ELEM_NAMES = {"f32": "float32", "f16": "float16", "i32": "int32", "u8": "uint8"}


@dataclass(frozen=True)
class FieldInfo:
    offset: int
    kind: str  # "u32" (dim, n_dims, query), "i64" (id), "ptr" (array capture), "f32" / "i32" (scalar)
    elem: str | None  # array element dtype (f32 f16 i32 u8)


def field_info(captures: tuple[CaptureSpec, ...], attr: str, abi: str = "v1") -> FieldInfo | None:
    if attr in ctx_fields(abi):
        if abi == "v2":
            return FieldInfo(CTX_V2_OFFSETS[attr], "i64" if attr == "id" else "u32", None)
        return FieldInfo(CTX_OFFSETS[attr], "u32", None)
    for i, c in enumerate(captures):
        if c.name == attr:
            if c.is_array:
                return FieldInfo(capture_offset(i, abi), "ptr", c.dtype)
            return FieldInfo(capture_offset(i, abi), c.dtype, None)
    return None


def numba_field_type(types_mod, info: FieldInfo):
    if info.kind in ("u32", "i64"):
        return types_mod.int64
    if info.kind == "ptr":
        return types_mod.CPointer(getattr(types_mod, _ELEM_NAMES[info.elem]))
    return getattr(types_mod, _ELEM_NAMES[info.kind])


_classes: dict[int, type] = {}


def ctx_type_class(types_mod) -> type:
    """The ctx type class for this copy of numba's types (one per back end; instances per ABI and
    capture list)."""
    cls = _classes.get(id(types_mod))
    if cls is None:
        class UdfCtxV1Type(types_mod.Type):
            """`const udf_ctx_v1 *` (abi "v1") or `const udf_ctx_v2 *` (abi "v2") with typed, named
            capture fields."""

            def __init__(self, captures: tuple[CaptureSpec, ...], abi: str = "v1"):
                self.captures = tuple(captures)
                self.abi = abi
                name = (f"UdfCtx{abi.upper()}(" + ", ".join(f"{c.name}: {c.udfc_type}" for c in self.captures)
                        + ")")
                super().__init__(name=name)

            def field(self, attr: str) -> FieldInfo | None:
                return field_info(self.captures, attr, self.abi)

        cls = _classes[id(types_mod)] = UdfCtxV1Type
    return cls
