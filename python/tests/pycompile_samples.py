"""User functions for test_pycompile.py.

A comment `# expect: TAG` marks the line a diagnostic for TAG must point at; the tests read
the markers from this file, so lines can move freely.
"""
import math

import numpy as np


# ----------------------------------------------------------------------------- good ones

def weighted_l2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d


def wl2_sqrt(acc, ctx):
    return math.sqrt(acc)


def mixed(x, y, acc, ctx):
    # f16[] h, i32[] k, u8[] u, f32 p, i32 q: every capture kind in one metric
    i = ctx.dim
    w = np.float32(ctx.h[i]) + np.float32(ctx.k[i]) + np.float32(ctx.u[i])
    d = x - y
    return acc + ctx.p * w * d * d + np.float32(ctx.q) + np.float32(ctx.n_dims - i)


def mixed_finalize(acc, ctx):
    return acc / np.float32(ctx.n_dims) + np.float32(ctx.q)


def int_l1(x, y, acc, ctx):
    d = x - y
    if d < 0:
        d = -d
    return acc + d * ctx.scale


def int_l1_finalize(acc, ctx):
    return np.float32(acc) * ctx.unit


def loop_metric(x, y, acc, ctx):
    s = acc
    for j in range(3):
        s += (x - y) * np.float32(j)
    return s


def returns_int_for_float(x, y, acc, ctx):
    return 1  # an int where ACC is f32: converted


def uses_float64(x, y, acc, ctx):
    return acc + 0.5 * (x - y)  # expect: float64


# ----------------------------------------------------------------------------- ctx typing probes
# captures h: f16[], k: i32[], u: u8[], p: f32, q: i32

def probe_dim(x, y, acc, ctx):
    return ctx.dim


def probe_n_dims(x, y, acc, ctx):
    return ctx.n_dims


def probe_h(x, y, acc, ctx):
    return ctx.h[ctx.dim]


def probe_k(x, y, acc, ctx):
    return ctx.k[ctx.dim]


def probe_u(x, y, acc, ctx):
    return ctx.u[ctx.dim]


def probe_p(x, y, acc, ctx):
    return ctx.p


def probe_q(x, y, acc, ctx):
    return ctx.q


def probe_x(x, y, acc, ctx):
    return x


# ----------------------------------------------------------------------------- bad ones

def returns_pointer(x, y, acc, ctx):
    return ctx.h  # expect: pointer-return



def unknown_capture(x, y, acc, ctx):
    d = x - y
    return acc + ctx.wieghts[ctx.dim] * d * d  # expect: unknown-capture


def three_params(x, y, acc):  # expect: arity
    return acc + x - y


def finalize_three(acc, ctx, extra):  # expect: arity-finalize
    return acc


def returns_tuple(x, y, acc, ctx):
    d = x - y
    return acc + d, d  # expect: tuple


def float_for_int(x, y, acc, ctx):
    d = x - y
    return acc + 0.5 * d  # expect: float-for-int


def typing_error(x, y, acc, ctx):
    d = x - y
    return acc + d + "a string"  # expect: typing


def uses_try(x, y, acc, ctx):
    try:  # expect: try
        return acc + x
    except ZeroDivisionError:
        return acc


def uses_list(x, y, acc, ctx):
    v = [x, y]  # expect: list
    return acc + v[0]


def undefined_name(x, y, acc, ctx):
    return acc + not_defined_anywhere(x)  # expect: undefined


def no_return(x, y, acc, ctx):  # expect: no-return
    acc + x


def may_fall_through(x, y, acc, ctx):
    if x > y:
        return acc + x
    acc = acc - y  # expect: fall-through


def writes_ctx(x, y, acc, ctx):
    ctx.dim = 3  # expect: ctx-write
    return acc


def pointer_plus_float(x, y, acc, ctx):
    return acc + ctx.weights  # expect: pointer


def alias_unknown(x, y, acc, ctx):
    c = ctx
    return acc + c.wieghts[0]  # expect: alias-unknown


def uses_assert(x, y, acc, ctx):
    assert x >= 0  # expect: assert
    return acc + x


def finalize_tuple(acc, ctx):
    return acc, acc  # expect: finalize-tuple
