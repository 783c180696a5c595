"""The few CUDA driver calls the Python layer makes itself, through ctypes (lazily): for arrays,
and the driver's early start.

Arrays that come with nothing but `__cuda_array_interface__`: which device a pointer is on, and
waiting for the producer's stream.  CuPy and PyTorch arrays are handled through their own
libraries.

The early start (`start_early`): once the package knows that a GPU will be used -- a metric or
filter is declared (udf._udf.Udf), a built-in one is asked for, an index is built or loaded, or
the GPU's arch is needed as the default arch -- a daemon thread starts the driver, so that its
start (slow on hosts with several GPUs) runs while the package compiles:

- what it does: dlopen libcuda.so.1, cuInit, the device's compute capability (its arch, which
  the compile needs: `early_arch`), then cuDevicePrimaryCtxRetain, which creates the primary
  context that udf_runtime_create retains (lib/runtime/capi/runtime_api.cpp).  Its reference
  keeps the context alive until the runtime of that device holds its own; `hand_over` then
  releases it, so the runtime's reference is the last, as without the early start.
- which device: the one asked for (Index.build / load), else device 0, which is
  CUDA_VISIBLE_DEVICES' first when that is set.  Once per process: later calls, for whatever
  device, do nothing.
- a process that imported udf.dask (a Dask client, whose metrics its workers search on their
  own GPUs) does not start on a declaration (`no_start_on_declaration`), only on an index.
- `UDF_CUDA_EARLY_START=0` (or off, no, false) turns it off: no thread is started.
- it never raises and never prints: without a driver or a device it stops, and the real use
  (udf._runtime.runtime) reports udf.NoDriverError as it always did.
- the real use while it runs: udf_runtime_create simply proceeds.  cuInit and
  cuDevicePrimaryCtxRetain are thread-safe; the driver makes a second caller wait for the
  start in progress and gives both the same primary context, so nothing is done twice; the
  start holds no lock of the package meanwhile.  Only `early_arch` waits, for the arch, which
  the runtime would otherwise have had to start the driver to tell.
- fork: os.fork waits until the start has finished, so a child never inherits a half-started
  driver (or a lock the thread holds); the child forgets the start.  As with any CUDA program,
  a child forked after the driver started cannot use CUDA: declaring a UDF now starts it
  (UDF_CUDA_EARLY_START=0 keeps the start at the first index, as before).  subprocess and the
  spawn and forkserver start methods are not affected.
- exit: the interpreter's exit waits for a start still running (at most EXIT_WAIT_S), so that
  the driver's own teardown never runs beside its start.
- work that waits for the arch (`after_arch`): once the start knows it, each piece runs on a
  daemon thread of its own -- a declared UDF compiles for that arch there, ahead of the first
  index (udf._udf).  fork and the interpreter's exit wait for these threads too.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time
from typing import Callable

from .errors import Status, UdfRuntimeError

_lock = threading.Lock()
_lib = None
CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76

#: the environment switch: "0", "off", "no" or "false" turns the early start off
EARLY_START_ENV = "UDF_CUDA_EARLY_START"
#: the longest the interpreter's exit waits for a start still running (a driver that hangs in
#: cuInit must not hang the exit of a program that never used the GPU)
EXIT_WAIT_S = 60.0


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


# ------------------------------------------------------------------------------ the early start


class EarlyStart:
    """One early start: its device, its thread, and what it reached.

    arch: the device's arch (90 for sm_90) once cuInit and the device's attributes are done
    (arch_known is set then, or when the start stops short of it); retained: the start holds a
    reference to the device's primary context (CUdevice `cu_device`); begun / arch_at / ended:
    time.perf_counter() when the thread was started, the arch was known and the start ended;
    done: set when the thread has finished, whatever it reached."""

    def __init__(self, device: int):
        self.device = device
        self.arch: int | None = None
        self.cu_device: int | None = None
        self.retained = False
        self.begun = time.perf_counter()
        self.arch_at: float | None = None
        self.ended: float | None = None
        self.arch_known = threading.Event()
        self.waiting: list[Callable[[int], None]] = []  # after_arch's work, until arch_known
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="udf-cuda-start", daemon=True)

    def _run(self) -> None:
        try:
            self._start_driver()
        except Exception:  # noqa: BLE001 -- never raises nor prints: the real use reports what is wrong
            pass
        finally:
            self._finish()

    def _finish(self) -> None:
        if self.ended is None:
            self.ended = time.perf_counter()
        self._arch_reached()
        self.done.set()

    def _arch_reached(self) -> None:
        """The arch is known (or never will be): the work waiting for it starts (after_arch)."""
        with _start_lock:
            if self.arch_known.is_set():
                return
            self.arch_known.set()
            waiting, self.waiting = self.waiting, []
        if self.arch is not None:
            for fn in waiting:
                _run_ahead(fn, self.arch)

    def _start_driver(self) -> None:
        """cuInit, the device's arch, its primary context; stops at the first call that fails."""
        lib = _driver()
        if lib is None or lib.cuInit(0) != 0:
            return
        dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(self.device)) != 0:
            return
        for out, attr in ((major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                          (minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)):
            if lib.cuDeviceGetAttribute(ctypes.byref(out), ctypes.c_int(attr), dev) != 0:
                return
        self.arch = major.value * 10 + minor.value
        self.arch_at = time.perf_counter()
        self._arch_reached()
        ctx = ctypes.c_void_p()
        if lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0:
            with _start_lock:
                self.cu_device, self.retained = dev.value, True


_start_lock = threading.Lock()
_start: EarlyStart | None = None
_on_declaration = True


def early_start_enabled() -> bool:
    """False when $UDF_CUDA_EARLY_START is 0, off, no or false."""
    return os.environ.get(EARLY_START_ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def start_early(device: int | None = None, *, declaration: bool = False) -> None:
    """Starts the driver for `device` (None: device 0) in a daemon thread, unless it was started
    before in this process or UDF_CUDA_EARLY_START turns it off (or, for a `declaration` of a
    UDF, no_start_on_declaration did).  Never raises."""
    global _start
    if _start is not None or (declaration and not _on_declaration) or not early_start_enabled():
        return
    try:
        ordinal = 0 if device is None else int(device)
    except (TypeError, ValueError):
        return  # the real use reports a bad device
    with _start_lock:
        if _start is not None:
            return
        s = _start = EarlyStart(ordinal)
    try:
        s.thread.start()
    except RuntimeError:  # no thread to be had: the real use starts the driver itself
        s._finish()


def no_start_on_declaration() -> None:
    """Declaring a UDF no longer starts the driver in this process (an index still does): for
    processes that declare metrics for others to search (udf.dask's client)."""
    global _on_declaration
    _on_declaration = False


def early_start() -> EarlyStart | None:
    """This process's early start, or None when none was started."""
    return _start


def early_arch(device: int) -> int | None:
    """`device`'s arch from the early start when it is starting that device (waiting until the
    arch is known: cuInit and the device's attributes), else None (no start, another device,
    or the start failed: the runtime then says why)."""
    s = _start
    if s is None or s.device != device:
        return None
    s.arch_known.wait()
    return s.arch


def after_arch(fn: Callable[[int], None]) -> bool:
    """Runs fn(arch) on a daemon thread of its own once the early start knows its device's arch
    (at once when it does already): work that needs the arch and can run before the first index
    needs it, such as compiling a declared UDF (udf._udf.PythonUdf._compile_ahead).  False, and
    nothing is run, when no start is running or it found no arch.  What fn raises is dropped."""
    s = _start
    if s is None:
        return False
    with _start_lock:
        if not s.arch_known.is_set():
            s.waiting.append(fn)
            return True
    if s.arch is None:
        return False
    _run_ahead(fn, s.arch)
    return True


_ahead: list[threading.Thread] = []  # after_arch's threads (fork and exit wait for them)


def _run_ahead(fn: Callable[[int], None], arch: int) -> None:
    def run() -> None:
        try:
            fn(arch)
        except Exception:  # noqa: BLE001 -- work ahead of need: the real use reports what is wrong
            pass
    t = threading.Thread(target=run, name="udf-ahead", daemon=True)
    with _start_lock:
        _ahead[:] = [a for a in _ahead if a.is_alive()]
        _ahead.append(t)
    try:
        t.start()
    except RuntimeError:  # no thread to be had: the real use does the work
        pass


def _join_ahead(timeout: float | None = None) -> None:
    """Waits for after_arch's threads (not the calling one)."""
    with _start_lock:
        threads = [t for t in _ahead if t is not threading.current_thread() and t.ident is not None]
    for t in threads:
        t.join(timeout)


def hand_over(device: int) -> None:
    """Called once the runtime of `device` holds its own reference to the primary context:
    releases the early start's (waiting for the start to finish), once."""
    s = _start
    if s is None or s.device != device:
        return
    s.done.wait()
    with _start_lock:
        if not s.retained:
            return
        s.retained = False
    lib = _driver()
    release = getattr(lib, "cuDevicePrimaryCtxRelease_v2", None) if lib is not None else None
    if release is not None:
        release(ctypes.c_int(s.cu_device))


def wait_early_start(timeout: float | None = None) -> bool:
    """Waits for a start in progress; True when none is running (any more)."""
    s = _start
    return s is None or s.done.wait(timeout)


def _before_fork() -> None:
    """No fork while the driver is half started (the child would inherit its locks held), nor
    while the thread is still winding down (a thread the fork would count)."""
    s = _start
    if s is not None:
        if s.thread.ident is not None:
            s.thread.join()
        s.done.wait()
    _join_ahead()


def _after_fork_in_child() -> None:
    """The child forgets the parent's start: its reference and arch belong to the parent's driver,
    which a forked child cannot use (the runtime then reports the child's own driver state)."""
    s = _start
    if s is not None:
        s.arch, s.retained = None, False
        s._finish()
    _ahead.clear()


def _wait_at_exit() -> None:
    wait_early_start(EXIT_WAIT_S)
    _join_ahead(EXIT_WAIT_S)


os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
atexit.register(_wait_at_exit)
