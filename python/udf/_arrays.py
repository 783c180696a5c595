"""Array interop: NumPy, CuPy, PyTorch, DLPack and `__cuda_array_interface__` objects.

`as_array(value, what=..., dtype=...)` turns an argument into an `Arr`: what to hand to
`udf._ext` (the raw `(ptr, device, dtype, rows, cols, row_stride)` tuple for CuPy and PyTorch
device arrays and objects that only have `__cuda_array_interface__`, read off the array without
a DLPack capsule; the array itself for NumPy, host tensors and other DLPack producers), with its
library, device (-1 = host), dtype and shape.

Conversions are done only where they lose nothing:
- Python lists / tuples (untyped) become NumPy arrays of the wanted dtype: numbers for float
  data, integers that fit for integer data;
- arrays are cast when NumPy's "safe" rule allows it (float16 -> float32, uint8 -> float32,
  int32 -> int64, ...), with the array's own library and on its own device;
- rows are made contiguous when the last axis is strided (values unchanged).
Anything else (float64 -> float32, int64 -> uint8, float -> int) is refused with an error naming
the argument and saying how to convert it explicitly.

`empty_like(arr, shape, dtype)` allocates outputs of the same library and device as `arr`.
The runtime works on its own stream: `producer_stream(arrs, device)` names the stream it should
wait for on the GPU (the current stream of CuPy or PyTorch when every device input is of that
library on the call's device), and otherwise `synchronize(arrs)` waits for the producers' current
streams on the host before the runtime reads or writes device memory.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from . import _cuda

# udf dtype name -> (runtime dtype code, NumPy name)
DTYPES = {"f32": (0, "float32"), "f16": (1, "float16"), "i8": (2, "int8"), "u8": (3, "uint8"),
          "i32": (4, "int32"), "i64": (5, "int64")}
CODE_TO_NAME = {code: name for name, (code, _np) in DTYPES.items()}
NUMPY_TO_NAME = {npname: name for name, (_code, npname) in DTYPES.items()}
HOST = -1
# DLPack device types (dlpack.h)
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


def dtype_name(code: int) -> str:
    """Runtime dtype code -> udf name ("f32", ...)."""
    return CODE_TO_NAME.get(int(code), f"dtype#{code}")


def udf_dtype(spec) -> str:
    """"f32" / "float32" / np.float32 / np.dtype("float32") -> "f32" (ValueError for other types)."""
    if isinstance(spec, str) and spec in DTYPES:
        return spec
    try:
        name = NUMPY_TO_NAME.get(np.dtype(spec).name)
    except TypeError:
        name = None
    if name is None:
        raise ValueError(f"dtype {spec!r} is not one of {', '.join(DTYPES)} (or their NumPy types)")
    return name


def numpy_dtype(name: str) -> np.dtype:
    """udf name ("f32") -> NumPy dtype."""
    return np.dtype(DTYPES[name][1])


@dataclass
class Arr:
    """An array argument ready for the runtime."""

    value: Any  # the array (converted if it had to be); keeps the memory alive
    arg: Any  # what udf._ext gets: the array, or the raw 6-tuple
    lib: str  # "numpy" | "cupy" | "torch" | "cai" | "dlpack" | "udf" (a udf._ext.DeviceArray's view)
    device: int  # CUDA ordinal, or -1 for host memory
    dtype: str | None  # NumPy dtype name, None when unknown
    shape: tuple[int, ...]
    stream: int | None = None  # __cuda_array_interface__ stream to wait for
    what: str = ""  # the argument's name, for messages

    @property
    def on_device(self) -> bool:
        return self.device >= 0


# ------------------------------------------------------------------------------ libraries


def _module(name):
    return sys.modules.get(name)


def library(value) -> str | None:
    """Which kind of array `value` is (without importing any library), None for lists etc."""
    if isinstance(value, np.ndarray):
        return "numpy"
    cupy = _module("cupy")
    if cupy is not None and isinstance(value, cupy.ndarray):
        return "cupy"
    torch = _module("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return "torch"
    if hasattr(value, "__cuda_array_interface__"):
        return "cai"
    if hasattr(value, "__dlpack__") and hasattr(value, "__dlpack_device__"):
        return "dlpack"
    return None


def is_array(value) -> bool:
    """True for arrays of any supported library (not for lists, numbers or NumPy scalars)."""
    return library(value) is not None


def _dtype_of(value, lib) -> str | None:
    if lib in ("numpy", "cupy"):
        return value.dtype.name
    if lib == "torch":
        return str(value.dtype).rpartition(".")[2]
    if lib == "cai":
        return np.dtype(value.__cuda_array_interface__["typestr"]).name
    try:
        return np.dtype(value.dtype).name
    except Exception:
        return None


def array_dtype_name(value) -> str | None:
    """The udf dtype name ("f32", ...) of an array of any supported library, None otherwise."""
    lib = library(value)
    if lib is None:
        return None
    npname = _dtype_of(value, lib)
    return NUMPY_TO_NAME.get(npname) if npname else None


def _device_of(value, lib) -> int:
    if lib == "numpy":
        return HOST
    if lib == "cupy":
        return int(value.device.id)
    if lib == "torch":
        dev = value.device
        if dev.type == "cpu":
            return HOST
        if dev.type != "cuda":
            raise TypeError(f"a PyTorch tensor on device '{dev}' (only CPU and CUDA tensors are supported)")
        return int(dev.index) if dev.index is not None else int(_module("torch").cuda.current_device())
    if lib == "cai":
        ptr = value.__cuda_array_interface__["data"][0]
        dev = _cuda.pointer_device(ptr)
        return 0 if dev is None else dev
    dev_type, dev_id = value.__dlpack_device__()
    if int(dev_type) in (_DL_CPU, _DL_CUDA_HOST):
        return HOST
    if int(dev_type) in (_DL_CUDA, _DL_CUDA_MANAGED):
        return int(dev_id)
    raise TypeError(f"an array on DLPack device type {int(dev_type)} (only host and CUDA memory are supported)")


def device_of(value) -> int:
    """CUDA ordinal of an array's memory, -1 for host memory (lists and numbers are host)."""
    torch = _module("torch")
    if torch is not None and isinstance(value, torch.Tensor) and value.is_cuda:
        return value.get_device()
    lib = library(value)
    return HOST if lib is None else _device_of(value, lib)


# ------------------------------------------------------------------------------ conversions


def _explain(what: str, src: str, dst: str) -> str:
    hint = f"{what}.astype(numpy.{dst})" if what.isidentifier() else f"...astype(numpy.{dst})"
    return (f"{what}: {src} values cannot be used as {dst} without losing information; "
            f"convert them explicitly (e.g. {hint}) if that is what you want")


def _check_safe(src: str, dst: str, what: str) -> None:
    if not np.can_cast(np.dtype(src), np.dtype(dst), "safe"):
        raise TypeError(_explain(what, src, dst))


def _from_untyped(value, dst: str | None, what: str) -> np.ndarray:
    """A list / tuple / scalar (no dtype of its own) -> NumPy array of dtype dst."""
    try:
        natural = np.asarray(value)
    except Exception as exc:
        raise TypeError(f"{what}: expected an array (NumPy, CuPy, PyTorch, DLPack or __cuda_array_interface__) "
                        f"or a list of numbers, got {type(value).__name__}") from exc
    if natural.dtype.kind not in "biuf":
        raise TypeError(f"{what}: expected numbers, got {type(value).__name__} of {natural.dtype}")
    if dst is None:
        return natural
    target = np.dtype(dst)
    if isinstance(value, np.generic) or hasattr(value, "__array__") and not isinstance(value, (list, tuple)):
        # a typed value (NumPy scalar, __array__ object): the array rule
        _check_safe(natural.dtype.name, dst, what)
        return np.ascontiguousarray(natural, dtype=target)
    if target.kind == "f":
        return np.ascontiguousarray(natural, dtype=target)
    if natural.dtype.kind == "f":
        raise TypeError(f"{what}: non-integer values for {dst} data")
    out = natural.astype(target)
    if not np.array_equal(out, natural):
        raise ValueError(f"{what}: values out of the {dst} range "
                         f"[{np.iinfo(target).min}, {np.iinfo(target).max}]")
    return np.ascontiguousarray(out)


def _astype(value, lib: str, dst: str):
    if lib in ("numpy", "cupy"):
        return value.astype(dst)
    if lib == "torch":
        return value.to(getattr(_module("torch"), dst))
    raise TypeError  # handled by the caller


def _contiguous(value, lib: str):
    if lib == "numpy":
        return np.ascontiguousarray(value)
    if lib == "cupy":
        return _module("cupy").ascontiguousarray(value)
    if lib == "torch":
        return value.contiguous()
    raise TypeError  # handled by the caller


def _needs_copy(value, lib: str, ndim: int) -> bool:
    """True when the last axis is strided or the row stride is negative / not whole elements."""
    if ndim == 0:
        return False
    if lib == "torch":
        strides, item = value.stride(), 1
    elif lib == "cai":
        cai = value.__cuda_array_interface__
        strides = cai.get("strides")
        if strides is None:
            return False
        item = np.dtype(cai["typestr"]).itemsize
    elif lib in ("numpy", "cupy"):
        strides, item = value.strides, value.itemsize
    else:
        return False  # another DLPack producer: the extension checks the layout
    shape = _shape_of(value, lib)
    if shape[-1] > 1 and strides[-1] != item:
        return True
    if ndim == 2 and shape[0] > 1 and (strides[0] < 0 or strides[0] % item):
        return True
    return False


def _shape_of(value, lib: str) -> tuple[int, ...]:
    if lib == "cai":
        return tuple(int(s) for s in value.__cuda_array_interface__["shape"])
    return tuple(int(s) for s in value.shape)


def as_array(value, *, what: str, dtype: str | None = None, ndims: Iterable[int] = (1, 2)) -> Arr:
    """`value` as an array the runtime can read.

    what: the argument's name for messages ("data", "queries", "capture 'weights'").
    dtype: the udf dtype it must have ("f32", "f16", "i8", "u8", "i32", "i64"), or None.
    ndims: the allowed numbers of dimensions.
    Raises TypeError (wrong kind or dtype, lossy conversion) or ValueError (shape, range).
    """
    ndims = tuple(ndims)
    ready = ready_device(value, dtype, ndims, what)
    if ready is not None:
        return ready
    dst = DTYPES[dtype][1] if dtype is not None else None
    lib = library(value)
    if lib is None:
        value, lib = _from_untyped(value, dst, what), "numpy"
    if lib == "torch":
        value = value.detach()
    src = _dtype_of(value, lib)
    if dst is not None and src is not None and src != dst:
        _check_safe(src, dst, what)
        if lib in ("cai", "dlpack"):
            raise TypeError(f"{what}: a {src} array where {dst} is needed; this array type cannot be "
                            f"converted here: pass a {dst} array")
        value = _astype(value, lib, dst)
        src = dst
    shape = _shape_of(value, lib)
    if len(shape) not in ndims:
        want = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"{what}: expected a {want} array, got shape {shape}")
    if _needs_copy(value, lib, len(shape)):
        if lib == "cai":
            raise ValueError(f"{what}: rows must be contiguous (unit stride along the last axis); "
                             f"this __cuda_array_interface__ array is strided: pass a contiguous copy")
        value = _contiguous(value, lib)
    device = _device_of(value, lib)
    arg, stream = value, None
    if lib == "cai":
        arg, stream = _raw_tuple(value, device, shape, src, what)
    elif lib == "torch" and device >= 0:
        arg = _torch_tuple(value, device, shape, src, what)
    elif lib == "cupy":
        arg = _cupy_tuple(value, device, shape, src, what)
    return Arr(value=value, arg=arg, lib=lib, device=device, dtype=src, shape=shape, stream=stream, what=what)


def ready_device(value, dtype: str | None, ndims: tuple[int, ...], what: str) -> Arr | None:
    """The Arr of a CuPy array or PyTorch CUDA tensor that as_array would take as it is (of the
    udf dtype `dtype`, rows contiguous, `ndims` dimensions), made without the general path's
    library probing; None for anything else, which the general path handles (or rejects).
    A search passes three to five arrays, so their probes are a good part of a small call's
    Python time."""
    ready = _ready_torch(value, dtype, ndims, what)
    return ready if ready is not None else _ready_cupy(value, dtype, ndims, what)


_TORCH_NAMES: dict = {}  # torch dtype -> NumPy name, for the dtypes of DTYPES


def _ready_torch(value, dtype: str | None, ndims: tuple[int, ...], what: str) -> Arr | None:
    """ready_device's PyTorch half: the same Arr as as_array's general path, or None."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor) or not value.is_cuda:
        return None
    if not _TORCH_NAMES:
        _TORCH_NAMES.update({getattr(torch, npname): npname for _code, npname in DTYPES.values()})
    src = _TORCH_NAMES.get(value.dtype)
    if src is None or (dtype is not None and src != DTYPES[dtype][1]):
        return None
    shape = tuple(value.shape)
    if len(shape) not in ndims or (shape and shape[-1] > 1 and value.stride(-1) != 1):
        return None
    if value.requires_grad:
        value = value.detach()
    device = value.get_device()  # a CUDA tensor's ordinal (what _device_of reads off value.device)
    return Arr(value=value, arg=_torch_tuple(value, device, shape, src, what), lib="torch", device=device, dtype=src,
               shape=shape, what=what)


def _ready_cupy(value, dtype: str | None, ndims: tuple[int, ...], what: str) -> Arr | None:
    """ready_device's CuPy half: the same Arr as as_array's general path, or None."""
    cupy = sys.modules.get("cupy")
    if cupy is None or not isinstance(value, cupy.ndarray):
        return None
    src = value.dtype.name
    if src not in NUMPY_TO_NAME or (dtype is not None and src != DTYPES[dtype][1]):
        return None
    shape = value.shape
    if len(shape) not in ndims or _needs_copy(value, "cupy", len(shape)):
        return None
    device = value.data.device_id
    return Arr(value=value, arg=_cupy_tuple(value, device, shape, src, what), lib="cupy", device=device, dtype=src,
               shape=shape, what=what)


def _tensor_tuple(ptr: int, device: int, shape, src: str | None, row_stride, what: str) -> tuple:
    """The raw 6-tuple udf._ext takes, (ptr, device, dtype code, rows, cols, row_stride), of an
    array of `shape` and NumPy dtype `src`; row_stride() gives its rows' stride in elements (2-D
    arrays of more than one row only)."""
    name = NUMPY_TO_NAME.get(src or "")
    if name is None:
        raise TypeError(f"{what}: element type {src} is not supported (f32, f16, i8, u8, i32 or i64)")
    if len(shape) == 0:
        rows, cols, stride = 1, 1, 0
    elif len(shape) == 1:
        rows, cols, stride = 1, shape[0], 0
    else:
        rows, cols = shape
        stride = row_stride() if rows > 1 else 0
    return (ptr, device, DTYPES[name][0], rows, cols, stride)


def _torch_tuple(value, device: int, shape, src: str | None, what: str):
    """A PyTorch device tensor as the raw 6-tuple: its pointer and layout, read off the tensor (a
    DLPack capsule costs a call several times as much; the Arr keeps the tensor alive)."""
    return _tensor_tuple(value.data_ptr(), device, shape, src, lambda: value.stride(0), what)


def _cupy_tuple(value, device: int, shape, src: str | None, what: str):
    """A CuPy array as the raw 6-tuple, read off the array: no DLPack capsule, and no stream
    ordering of CuPy's own (producer_stream or synchronize does that; the Arr keeps the array
    alive)."""
    return _tensor_tuple(value.data.ptr, device, shape, src, lambda: value.strides[0] // value.itemsize, what)


def _raw_tuple(value, device: int, shape, src: str | None, what: str):
    cai = value.__cuda_array_interface__
    strides = cai.get("strides")
    item = np.dtype(src).itemsize if src in NUMPY_TO_NAME else 1

    def row_stride():
        return strides[0] // item if strides is not None else 0
    stream = cai.get("stream")
    arg = _tensor_tuple(int(cai["data"][0] or 0), device, shape, src, row_stride, what)
    return arg, (int(stream) if stream else None)


# ------------------------------------------------------------------------------ scalars


def scalar_value(value, *, what: str, integer: bool) -> int | float:
    """A scalar capture's value as a Python number: `integer` for i32 captures, else float.

    Accepts Python numbers, NumPy scalars and 0-D / one-element arrays of any library.
    """
    if isinstance(value, bool):
        raise TypeError(f"{what}: a bool is not a number for a scalar capture")
    if is_array(value):
        lib = library(value)
        shape = _shape_of(value, lib)
        if int(np.prod(shape)) != 1:
            raise ValueError(f"{what}: a scalar capture needs one value, got an array of shape {shape}")
        value = value.item() if hasattr(value, "item") else np.asarray(value).item()
    elif isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, (int, float)):
        raise TypeError(f"{what}: expected a number, got {type(value).__name__}")
    if integer:
        if isinstance(value, float):
            if not value.is_integer():
                raise TypeError(f"{what}: is an i32 scalar; got {value!r}, not an integer")
            value = int(value)
        if not -2**31 <= value < 2**31:
            raise ValueError(f"{what}: {value} is outside the i32 range")
        return int(value)
    return float(value)


# ------------------------------------------------------------------------------ outputs


def empty_like(like: Arr, shape: tuple[int, ...], dtype: str) -> tuple[Any, Any]:
    """(array, arg for udf._ext): an uninitialised array of udf dtype `dtype` with the library and
    device of `like` (host NumPy for host inputs of NumPy / other DLPack producers)."""
    npname = DTYPES[dtype][1]
    if like.lib == "torch":
        torch = _module("torch")
        # The device as an ordinal: no torch.device is made for an output.
        out = torch.empty(shape, dtype=getattr(torch, npname), device=like.device if like.on_device else "cpu")
        if like.on_device:
            return out, _torch_tuple(out, like.device, tuple(shape), npname, "output")
        return out, out
    if like.lib == "cupy":
        cupy = _module("cupy")
        with cupy.cuda.Device(like.device):
            out = cupy.empty(shape, dtype=npname)
        return out, _cupy_tuple(out, like.device, tuple(shape), npname, "output")
    if not like.on_device:
        out = np.empty(shape, dtype=npname)
        return out, out
    return _device_empty(like.device, shape, npname, like.value)


def _device_empty(device: int, shape, npname: str, like_value):
    """Device outputs for queries that came as __cuda_array_interface__ / DLPack device arrays:
    a numba device array when numba-cuda is installed, else CuPy."""
    prefer_cupy = type(like_value).__module__.split(".")[0] == "cupy"
    errors = []
    for name in (("cupy", "numba") if prefer_cupy else ("numba", "cupy")):
        try:
            if name == "numba":
                # numba is optional: imported only for a numba array
                from numba import cuda as nbcuda
                with nbcuda.gpus[device]:
                    out = nbcuda.device_array(shape, dtype=npname)
                arr = as_array(out, what="output", ndims=(len(shape),))
                return out, arr.arg
            # cupy is optional: imported only for a cupy array
            import cupy
            with cupy.cuda.Device(device):
                out = cupy.empty(shape, dtype=npname)
            return out, _cupy_tuple(out, device, tuple(shape), npname, "output")
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    raise TypeError("device outputs for queries given by __cuda_array_interface__ / DLPack need numba-cuda "
                    "or CuPy to allocate them, and neither can be imported (" + "; ".join(errors) + ")")


# ------------------------------------------------------------------------------ streams


def producer_stream(arrays: Iterable[Arr], device: int) -> int | None:
    """The CUstream handle the runtime's stream should wait for on the GPU before a call
    (udf._ext's after_stream, udf_runtime_wait_stream) in place of synchronize(arrays): the current
    stream of `device` in PyTorch or CuPy when every device array among `arrays` is of that one
    library on `device` (the runtime's own device copies aside); None otherwise, and then the
    caller synchronizes.  CuPy's default stream is the legacy one, handle 0."""
    lib = None
    for a in arrays:
        if not a.on_device or a.lib == "udf":
            continue
        if a.lib not in ("torch", "cupy") or a.device != device or lib not in (None, a.lib):
            return None
        lib = a.lib
    if lib == "torch":
        torch = _module("torch")
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        return int(raw(device)) if raw is not None else int(torch.cuda.current_stream(device).cuda_stream)
    cupy = _module("cupy") if lib == "cupy" else None
    if cupy is None:
        return None
    with cupy.cuda.Device(device):  # CuPy's current stream is per device
        return int(cupy.cuda.get_current_stream().ptr)


def synchronize(arrays: Iterable[Arr]) -> None:
    """Waits for the producers' current streams on every device array (CuPy: the current stream
    of the array's device; PyTorch: torch.cuda.current_stream(device); __cuda_array_interface__:
    its `stream`), so that the runtime, which works on its own stream, sees finished data."""
    cupy_devices, torch_devices, streams = set(), set(), set()
    for a in arrays:
        if not a.on_device:
            continue
        if a.lib == "cupy":
            cupy_devices.add(a.device)
        elif a.lib == "torch":
            torch_devices.add(a.device)
        elif a.stream is not None:
            streams.add(a.stream)
    if cupy_devices:
        cupy = _module("cupy")
        for d in sorted(cupy_devices):
            with cupy.cuda.Device(d):
                cupy.cuda.get_current_stream().synchronize()
    if torch_devices:
        torch = _module("torch")
        for d in sorted(torch_devices):
            torch.cuda.current_stream(d).synchronize()
    for s in sorted(streams):
        _cuda.stream_synchronize(s)
