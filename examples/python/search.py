"""The seed flow end to end: a metric written in Python (metric.py), compiled to
LTO-IR by numba-cuda, packaged by udfc, linked at run time for this GPU with
udf_module_link, then an IVF-Flat index built and searched through the C API
(ctypes over libudf_runtime.so), with the weights capture bound from a host
numpy array and, when CuPy or PyTorch is there, from a device array through
DLPack.  The results are checked against a numpy float64 brute force; the
exit status is non-zero on any mismatch.

    python3 search.py [--build-dir ../../build] [--n 20000] [--dim 64] [--queries 200]
    python3 search.py --ltoir py_wl2.ltoir ...   # LTO-IR made earlier by `metric.py --arch sm_XX`,
                                                 # e.g. on a build machine without a GPU
"""
import argparse
import ctypes as C
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

import metric_abi

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------- the C API (include/udf/runtime.h)

F32, F16, I8, U8, I32, I64 = range(6)
HOST = -1


class Tensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", C.c_int32), ("dtype", C.c_int), ("rows", C.c_int64),
                ("cols", C.c_int64), ("row_stride", C.c_int64)]


class DeviceInfo(C.Structure):
    _fields_ = [("name", C.c_char * 256), ("ordinal", C.c_int32), ("arch", C.c_int32), ("sm_count", C.c_int32),
                ("reserved", C.c_int32), ("total_memory", C.c_int64), ("max_shared_per_block", C.c_int64)]


class ArtifactSource(C.Structure):
    _fields_ = [("path", C.c_char_p), ("data", C.c_void_p), ("size", C.c_size_t), ("name", C.c_char_p)]


PROGRESS = C.CFUNCTYPE(None, C.c_void_p, C.c_double, C.c_char_p)


# The parameter structs are versioned (runtime.h, "Versioned structs"): struct_size first, filled
# by udf_X_init(byref(p), sizeof(p)); a layout test (test/abi/ctypes_layout_test.py) checks every
# declaration here against the C header.
class IndexParams(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("n_lists", C.c_uint32), ("kmeans_iters", C.c_uint32), ("seed", C.c_uint64), ("balance", C.c_double),
                ("max_train_rows", C.c_uint32), ("shard_layout", C.c_uint32), ("progress", PROGRESS),
                ("progress_user", C.c_void_p), ("centroids", C.POINTER(C.c_float)), ("kmeans_mesoclusters", C.c_uint32),
                ("coarse_weights", C.POINTER(C.c_float))]


class CaptureBinding(C.Structure):
    _fields_ = [("name", C.c_char_p), ("tensor", C.POINTER(Tensor)), ("f32", C.c_float), ("i32", C.c_int32)]


class SearchParams(C.Structure):
    _fields_ = [("struct_size", C.c_size_t), ("k", C.c_uint32), ("n_probes", C.c_uint32),
                ("queries_per_item", C.c_uint32), ("max_batch", C.c_uint32),
                ("captures", C.POINTER(CaptureBinding)), ("n_captures", C.c_size_t),
                ("filter", C.c_char_p), ("filter_captures", C.POINTER(CaptureBinding)),
                ("n_filter_captures", C.c_size_t)]


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device", DLDevice), ("ndim", C.c_int32), ("dtype", DLDataType),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class DLManagedTensor(C.Structure):
    pass


DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p),
                            ("deleter", C.CFUNCTYPE(None, C.POINTER(DLManagedTensor)))]


class UdfError(RuntimeError):
    pass


def load_library(build_dir):
    path = os.environ.get("UDF_RUNTIME_LIBRARY") or os.path.join(build_dir, "lib", "libudf_runtime.so")
    lib = C.CDLL(path)
    P = C.c_void_p
    sig = {
        "udf_last_error": (C.c_char_p, []),
        "udf_status_name": (C.c_char_p, [C.c_int]),
        "udf_runtime_create": (C.c_int, [C.c_int32, C.POINTER(P)]),
        "udf_runtime_destroy": (None, [P]),
        "udf_runtime_device_info": (C.c_int, [P, C.POINTER(DeviceInfo)]),
        "udf_module_link": (C.c_int, [P, C.POINTER(ArtifactSource), C.c_size_t, C.POINTER(P)]),
        "udf_module_destroy": (None, [P]),
        "udf_index_params_init": (None, [C.POINTER(IndexParams), C.c_size_t]),
        "udf_index_build": (C.c_int, [P, C.c_char_p, C.POINTER(Tensor), C.POINTER(Tensor), C.POINTER(IndexParams),
                                      C.POINTER(P)]),
        "udf_index_destroy": (None, [P]),
        "udf_search_params_init": (None, [C.POINTER(SearchParams), C.c_size_t]),
        "udf_index_search": (C.c_int, [P, C.POINTER(Tensor), C.POINTER(SearchParams), C.POINTER(Tensor),
                                       C.POINTER(Tensor)]),
        # include/udf/runtime_interop.h
        "udf_tensor_from_dlpack": (C.c_int, [P, C.POINTER(Tensor), C.POINTER(P)]),
        "udf_tensor_handle_release": (None, [P]),
        "udf_index_search_dlpack": (C.c_int, [P, C.POINTER(Tensor), C.POINTER(SearchParams), C.c_int32,
                                              C.POINTER(C.POINTER(DLManagedTensor)),
                                              C.POINTER(C.POINTER(DLManagedTensor))]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def check(lib, status, what):
    if status != 0:
        raise UdfError(f"{what}: {lib.udf_status_name(status).decode()}: {lib.udf_last_error().decode()}")


def host_tensor(a, dtype):
    a = np.ascontiguousarray(a)
    rows, cols = (1, a.shape[0]) if a.ndim == 1 else a.shape
    return Tensor(a.ctypes.data, HOST, dtype, rows, cols, 0), a


# ---------------------------------------------------------------- DLPack from Python

_capsule_get = C.pythonapi.PyCapsule_GetPointer
_capsule_get.restype, _capsule_get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
_capsule_rename = C.pythonapi.PyCapsule_SetName
_capsule_rename.restype, _capsule_rename.argtypes = C.c_int, [C.py_object, C.c_char_p]
_capsule_new = C.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = C.py_object, [C.c_void_p, C.c_char_p, C.c_void_p]


def import_dlpack(lib, array):
    """A device array (CuPy, PyTorch) -> (udf_tensor view, handle).  The runtime
    consumes the capsule (renamed "used_dltensor", as the protocol says) and
    calls its deleter once, when the handle is released."""
    capsule = array.__dlpack__()
    ptr = _capsule_get(capsule, b"dltensor")
    _capsule_rename(capsule, b"used_dltensor")
    view, handle = Tensor(), C.c_void_p()
    check(lib, lib.udf_tensor_from_dlpack(ptr, C.byref(view), C.byref(handle)), "udf_tensor_from_dlpack")
    return view, handle


class _Exported:
    """Hands a DLManagedTensor* the runtime exported to a consumer's from_dlpack."""

    def __init__(self, ptr, device):
        self.ptr, self.device = ptr, device

    def __dlpack_device__(self):
        return (2, self.device) if self.device >= 0 else (1, 0)

    def __dlpack__(self, stream=None, **kwargs):
        # The consumer renames it and calls the deleter, which frees the runtime's buffer.
        return _capsule_new(C.cast(self.ptr, C.c_void_p), b"dltensor", None)


# ---------------------------------------------------------------- the flow

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--ltoir", help="use this LTO-IR (from `metric.py --arch sm_XX`) instead of compiling with numba-cuda here")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--n-lists", type=int, default=64)
    ap.add_argument("--device-arrays", choices=["auto", "cupy", "torch", "none"], default="auto",
                    help="library for the device-array (DLPack) check (auto: CuPy, else PyTorch)")
    a = ap.parse_args()
    build = os.path.abspath(a.build_dir)
    lib = load_library(build)

    rt = C.c_void_p()
    check(lib, lib.udf_runtime_create(0, C.byref(rt)), "udf_runtime_create")
    info = DeviceInfo()
    check(lib, lib.udf_runtime_device_info(rt, C.byref(info)), "udf_runtime_device_info")
    arch = info.arch
    print(f"device: {info.name.decode()} (sm_{arch})")

    # 1. Python -> LTO-IR (numba-cuda) -> artifact (udfc).
    t = time.perf_counter()
    if a.ltoir:
        ltoir = open(a.ltoir, "rb").read()
        made = f"read from {a.ltoir}"
    else:
        import metric  # numba-cuda, only where the LTO-IR is compiled here

        ltoir = metric.compile_ltoir(arch)
        made = "compiled by numba-cuda"
    with tempfile.TemporaryDirectory() as tmp:
        src, art = os.path.join(tmp, "py_wl2.ltoir"), os.path.join(tmp, "py_wl2.udfa")
        with open(src, "wb") as f:
            f.write(ltoir)
        udfc = os.environ.get("UDFC") or os.path.join(build, "bin", "udfc")
        r = subprocess.run([udfc, src, *metric_abi.UDFC_FLAGS, "--arch", f"sm_{arch}", "-o", art],
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            raise UdfError(f"udfc failed (exit {r.returncode})")
        artifact = open(art, "rb").read()
    print(f"LTO-IR {len(ltoir)} bytes ({made}) -> artifact {len(artifact)} bytes (udfc) "
          f"in {time.perf_counter() - t:.2f} s")

    # 2. Link at run time for this GPU (artifact from memory).
    t = time.perf_counter()
    buf = C.create_string_buffer(artifact, len(artifact))
    src = ArtifactSource(None, C.cast(buf, C.c_void_p), len(artifact), b"py_wl2.udfa")
    mod = C.c_void_p()
    check(lib, lib.udf_module_link(rt, C.byref(src), 1, C.byref(mod)), "udf_module_link")
    print(f"udf_module_link: linked and loaded in {time.perf_counter() - t:.2f} s")

    # 3. Build an index.
    rng = np.random.default_rng(42)
    data = rng.standard_normal((a.n, a.dim), dtype=np.float32)
    queries = rng.standard_normal((a.queries, a.dim), dtype=np.float32)
    weights = rng.uniform(0.1, 2.0, a.dim).astype(np.float32)
    p = IndexParams()
    lib.udf_index_params_init(C.byref(p), C.sizeof(p))
    p.n_lists = a.n_lists
    dt, data = host_tensor(data, F32)
    ix = C.c_void_p()
    t = time.perf_counter()
    check(lib, lib.udf_index_build(mod, metric_abi.SYMBOL.encode(), C.byref(dt), None, C.byref(p), C.byref(ix)),
          "udf_index_build")
    print(f"index: {a.n} x {a.dim} f32 in {a.n_lists} lists built in {time.perf_counter() - t:.2f} s")

    # 4. The reference: numpy float64 brute force under the same metric.
    d64 = data.astype(np.float64)
    q64 = queries.astype(np.float64)
    w64 = weights.astype(np.float64)
    ref_d = ((q64[:, None, :] - d64[None, :, :]) ** 2 * w64).sum(-1)
    ref_ids = np.argsort(ref_d, axis=1, kind="stable")[:, :a.k]
    ref_dist = np.take_along_axis(ref_d, ref_ids, 1)

    def compare(label, ids, dist):
        ids, dist = np.asarray(ids), np.asarray(dist, dtype=np.float64)
        hits = sum(len(set(ids[i]) & set(ref_ids[i])) for i in range(a.queries))
        recall = hits / (a.queries * a.k)
        err = np.abs(dist - ref_dist).max()
        rel = err / max(1e-12, np.abs(ref_dist).max())
        ok = recall >= 0.999 and rel < 1e-4
        print(f"check [{label}]: {a.queries} queries, k {a.k}, recall@{a.k} {recall:.4f}, "
              f"max |d - d_ref| {err:.3g} (relative {rel:.2g}): {'OK' if ok else 'MISMATCH'}")
        return ok

    sp = SearchParams()
    lib.udf_search_params_init(C.byref(sp), C.sizeof(sp))
    sp.k, sp.n_probes = a.k, a.n_lists  # every list probed: exact, comparable with brute force
    ok = True

    # 4a. weights from a host numpy array.
    wt, weights = host_tensor(weights, F32)
    binding = CaptureBinding(b"weights", C.pointer(wt), 0.0, 0)
    sp.captures, sp.n_captures = C.pointer(binding), 1
    qt, queries = host_tensor(queries, F32)
    out_d = np.empty((a.queries, a.k), np.float32)
    out_i = np.empty((a.queries, a.k), np.int64)
    od, _ = host_tensor(out_d, F32)
    oi, _ = host_tensor(out_i, I64)
    t = time.perf_counter()
    check(lib, lib.udf_index_search(ix, C.byref(qt), C.byref(sp), C.byref(od), C.byref(oi)), "udf_index_search")
    print(f"search: {a.queries} queries in {(time.perf_counter() - t) * 1e3:.2f} ms")
    ok &= compare("host numpy weights", out_i, out_d)

    # 4b. weights and queries from device arrays through DLPack, results exported as DLPack.
    xp = None
    if a.device_arrays in ("auto", "cupy"):
        try:
            import cupy as xp  # noqa: F811
        except Exception:
            xp = None
    if xp is None and a.device_arrays in ("auto", "torch"):
        try:
            import torch
            if torch.cuda.is_available():
                xp = torch
        except Exception:
            xp = None
    if xp is None:
        why = "--device-arrays none" if a.device_arrays == "none" else "no usable CuPy or PyTorch with CUDA"
        print(f"check [device DLPack]: skipped ({why})")
    else:
        name = xp.__name__
        if name == "cupy":
            wd, qd = xp.asarray(weights), xp.asarray(queries)
        else:
            wd, qd = xp.from_numpy(weights).cuda(), xp.from_numpy(queries).cuda()
        wv, wh = import_dlpack(lib, wd)
        qv, qh = import_dlpack(lib, qd)
        binding = CaptureBinding(b"weights", C.pointer(wv), 0.0, 0)
        sp.captures = C.pointer(binding)
        dptr, iptr = C.POINTER(DLManagedTensor)(), C.POINTER(DLManagedTensor)()
        status = lib.udf_index_search_dlpack(ix, C.byref(qv), C.byref(sp), 0, C.byref(dptr), C.byref(iptr))
        lib.udf_tensor_handle_release(wh)  # deleters run now, exactly once
        lib.udf_tensor_handle_release(qh)
        check(lib, status, "udf_index_search_dlpack")
        if name == "cupy":
            dist, ids = xp.from_dlpack(_Exported(dptr, 0)), xp.from_dlpack(_Exported(iptr, 0))
            dist, ids = xp.asnumpy(dist), xp.asnumpy(ids)
        else:
            import torch.utils.dlpack as tdl
            dist = tdl.from_dlpack(_capsule_new(C.cast(dptr, C.c_void_p), b"dltensor", None)).cpu().numpy()
            ids = tdl.from_dlpack(_capsule_new(C.cast(iptr, C.c_void_p), b"dltensor", None)).cpu().numpy()
        ok &= compare(f"device DLPack via {name}", ids, dist)

    lib.udf_index_destroy(ix)
    lib.udf_module_destroy(mod)
    lib.udf_runtime_destroy(rt)
    print("OK" if ok else "FAILED: results differ from the float64 brute force")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UdfError as e:
        print(f"search.py: error: {e}", file=sys.stderr)
        sys.exit(1)
