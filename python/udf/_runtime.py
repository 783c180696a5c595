"""The runtime extension `udf._ext`, imported lazily, and one runtime per CUDA device.

`import udf` and everything that compiles or links work without the extension and without a
GPU; only building, loading and searching indexes need them.  The driver may have been started
already, in the background (udf._cuda.start_early); a runtime made while that start runs simply
proceeds (the driver makes it wait for the start in progress), and then takes over its
reference to the device's primary context (udf._cuda.hand_over).
"""
from __future__ import annotations

import threading

from . import _cuda
from .errors import NoDriverError, Status, UdfError, UdfRuntimeError

_lock = threading.Lock()
_runtimes: dict[int, object] = {}


def ext():
    """The module udf._ext; UdfError saying how to build it when it is missing."""
    try:
        # the native extension is optional (compiling and linking do not need it) and loads on first use
        from . import _ext
    except ImportError as exc:
        raise UdfError(
            "the udf runtime extension (udf._ext) is not available: " + str(exc) + ". It is built with the "
            "package: `pip install .` in the udf repository, or the CMake build with -DUDF_BUILD_PYTHON=ON "
            "(then use build/python on PYTHONPATH). Compiling and linking metrics do not need it.") from exc
    return _ext


def runtime(device: int = 0):
    """The process's udf._ext.Runtime for CUDA device `device` (created on first use).

    Raises NoDriverError (a UdfRuntimeError, UDF_ERROR_NO_DRIVER) without a usable
    libcuda.so.1, UdfRuntimeError UDF_ERROR_NO_DEVICE for a bad ordinal."""
    device = int(device)
    with _lock:
        rt = _runtimes.get(device)
        if rt is None:
            try:
                rt = ext().Runtime(device)
            except UdfRuntimeError as exc:
                if exc.status != Status.NO_DRIVER:
                    raise
                raise NoDriverError.from_runtime(exc.message) from None
            _runtimes[device] = rt
            _cuda.hand_over(device)  # the runtime holds the primary context now
        return rt


def device_info(device: int = 0) -> dict:
    """The GPU's name, ordinal, arch (90 for sm_90), sm_count, total_memory and
    max_shared_per_block (bytes).  Raises NoDriverError (UDF_ERROR_NO_DRIVER) without a driver."""
    return dict(runtime(device).device_info())
