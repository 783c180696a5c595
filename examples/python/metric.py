"""A weighted squared-L2 metric written in Python and compiled to LTO-IR by numba-cuda.

The UDF ABI (include/udf/abi/metric_v1.h) is

    float py_wl2(float x, float y, float acc, const udf_ctx_v1 *ctx)

with ctx->dim (u32) at byte 0 and capture i (8 bytes: a device pointer for
arrays) at byte 16 + 8 * i.  numba has no struct pointer type for C, so ctx is
declared as a `uint8*` and two small intrinsics read the fields from it with
plain loads (they inline into the metric: no call remains after nvJitLink -lto).

    python3 metric.py [--arch sm_90] [-o py_wl2.ltoir]
"""
import argparse

import numpy as np

# numba-cuda 0.30 registers an overload for np.row_stack, which NumPy 2.5
# removed (an alias of np.vstack): put the alias back before importing it.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

from llvmlite import ir  # noqa: E402
from numba import cuda, types  # noqa: E402
from numba.core.extending import intrinsic  # noqa: E402

CTX = types.CPointer(types.uint8)  # const udf_ctx_v1 *


@intrinsic
def ctx_dim(typingctx, ctx):
    """ctx->dim: the u32 at byte 0."""

    def codegen(context, builder, sig, args):
        return builder.load(builder.bitcast(args[0], ir.IntType(32).as_pointer()))

    return types.uint32(ctx), codegen


@intrinsic
def ctx_capture_f32_array(typingctx, ctx, index):
    """ctx->captures[index].ptr as `const float *` (byte 16 + 8 * index)."""

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        idx = builder.sext(args[1], i64) if args[1].type.width < 64 else args[1]
        offset = builder.add(builder.mul(idx, ir.Constant(i64, 8)), ir.Constant(i64, 16))
        slot = builder.bitcast(builder.gep(args[0], [offset]), ir.FloatType().as_pointer().as_pointer())
        return builder.load(slot)

    return types.CPointer(types.float32)(ctx, index), codegen


def py_wl2(x, y, acc, ctx):
    """acc + weights[dim] * (x - y)^2, weights being capture 0 (f32[])."""
    weights = ctx_capture_f32_array(ctx, 0)
    d = x - y
    return acc + weights[ctx_dim(ctx)] * d * d


SIGNATURE = types.float32(types.float32, types.float32, types.float32, CTX)
from metric_abi import SYMBOL, UDFC_FLAGS  # noqa: E402  (shared with search.py, which may run without numba)


def compile_ltoir(arch: int = 90) -> bytes:
    """LTO-IR of py_wl2 for sm_<arch> (no GPU needed)."""
    code, _restype = cuda.compile(py_wl2, SIGNATURE, device=True, abi="c", abi_info={"abi_name": SYMBOL},
                                  output="ltoir", cc=(arch // 10, arch % 10))
    return bytes(code)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("-o", "--output", default="py_wl2.ltoir")
    a = ap.parse_args()
    data = compile_ltoir(int(a.arch.removeprefix("sm_")))
    with open(a.output, "wb") as f:
        f.write(data)
    print(f"wrote {a.output} ({len(data)} bytes of LTO-IR for {a.arch}); package it with:")
    print(f"  udfc {a.output} {' '.join(UDFC_FLAGS)} --arch {a.arch} -o {SYMBOL}.udfa")
