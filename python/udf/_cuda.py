"""The few CUDA driver calls the Python layer makes itself, through ctypes (lazily).

Only for arrays that come with nothing but `__cuda_array_interface__`: which device a pointer
is on, and waiting for the producer's stream.  CuPy and PyTorch arrays are handled through
their own libraries.
"""
from __future__ import annotations

import ctypes
import threading
from .errors import Status, UdfRuntimeError

_lock = threading.Lock()
_lib = None
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9


def _driver():
    global _lib
    with _lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL("libcuda.so.1")
            except OSError:
                lib = False
            _lib = lib
    return _lib or None


def pointer_device(ptr: int) -> int | None:
    """The CUDA ordinal of device memory `ptr`, or None when the driver cannot tell."""
    lib = _driver()
    if lib is None or not ptr:
        return None
    out = ctypes.c_int(-1)
    rc = lib.cuPointerGetAttribute(ctypes.byref(out), ctypes.c_int(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL),
                                   ctypes.c_uint64(ptr))
    return out.value if rc == 0 and out.value >= 0 else None


def stream_synchronize(stream: int) -> None:
    """cuStreamSynchronize on a stream handle (1 = legacy default, 2 = per-thread default)."""
    lib = _driver()
    if lib is None:
        return
    rc = lib.cuStreamSynchronize(ctypes.c_void_p(stream))
    if rc != 0:
        raise UdfRuntimeError.of(Status.CUDA, f"cuStreamSynchronize on the array's stream "
                                              f"({stream:#x}) failed with CUresult {rc}")
