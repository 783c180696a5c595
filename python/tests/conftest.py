"""pytest setup for the Python package's tests (CPU-only unless marked `gpu`).

- `udf` is imported from $UDF_PYTHON_DIR when set (the build tree's build/python, with the
  extension), else from the source tree (python/, no extension).
- The tools are found as the package finds them ($UDF_BIN_DIR first; see udf/_tools.py).
- Unless $UDF_CACHE_DIR is set, the tools' on-disk cache is a fresh folder for the session.
- Tests marked `gpu` are skipped, with the reason printed, without a usable CUDA driver and
  device; those that need udf._ext skip (with the reason) when it is not built.
"""
import ctypes
import os
import sys
from pathlib import Path

import pytest

PYTHON_DIR = Path(os.environ.get("UDF_PYTHON_DIR") or Path(__file__).resolve().parents[1]).resolve()
TESTS_DIR = Path(__file__).resolve().parent
for p in (str(TESTS_DIR), str(PYTHON_DIR)):  # PYTHON_DIR ends up first
    if p in sys.path:
        sys.path.remove(p)
    sys.path.insert(0, p)

BACKENDS = ("numba-cuda", "numba-cuda-mlir")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and driver")
    # print the reason of every skip (a missing back end, missing tools) in the summary
    chars = config.option.reportchars or ""
    if "s" not in chars and "a" not in chars and "A" not in chars:
        config.option.reportchars = chars + "s"


def pytest_report_header(config):
    import udf
    try:
        tools = str(udf.tool_path("udfc").parent)
    except udf.UdfError as e:
        tools = f"not found ({e})"
    return [f"udf: {Path(udf.__file__).parent} (extension: {ext_status()[1]}); tools: {tools}",
            f"gpu: {gpu_status()[1]}"]


def pytest_collection_modifyitems(config, items):
    ok, why = gpu_status()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"no CUDA GPU: {why}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


_gpu = None


def gpu_status():
    """(True, "N device(s)") or (False, why): libcuda.so.1 loads, cuInit works, a device exists."""
    global _gpu
    if _gpu is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            _gpu = (False, f"cannot load libcuda.so.1 ({e})")
        else:
            count = ctypes.c_int(0)
            rc = lib.cuInit(0)
            if rc == 0:
                rc = lib.cuDeviceGetCount(ctypes.byref(count))
            if rc != 0:
                _gpu = (False, f"cuInit / cuDeviceGetCount failed (CUresult {rc})")
            elif count.value == 0:
                _gpu = (False, "the CUDA driver sees no device")
            else:
                _gpu = (True, f"{count.value} device(s)")
    return _gpu


def ext_status():
    """(True, path) or (False, why) for udf._ext."""
    try:
        import udf._ext as ext
    except ImportError as e:
        return False, f"udf._ext not importable ({e}); build it with `pip install .` or CMake -DUDF_BUILD_PYTHON=ON"
    return True, ext.__file__


@pytest.fixture(scope="session")
def ext():
    """udf._ext, or a skip with the reason."""
    ok, why = ext_status()
    if not ok:
        pytest.skip(why)
    import udf._ext
    return udf._ext


@pytest.fixture(scope="session", autouse=True)
def _tool_cache(tmp_path_factory):
    """A fresh on-disk cache for the tools, unless $UDF_CACHE_DIR is set."""
    if os.environ.get("UDF_CACHE_DIR"):
        yield os.environ["UDF_CACHE_DIR"]
        return
    path = tmp_path_factory.mktemp("udf-cache")
    os.environ["UDF_CACHE_DIR"] = str(path)
    try:
        yield str(path)
    finally:
        os.environ.pop("UDF_CACHE_DIR", None)


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Each back end; skipped, with the reason, when it is not installed."""
    from udf._pycompile import backend_available
    ok, why = backend_available(request.param)
    if not ok:
        pytest.skip(f"backend {request.param} not installed: {why}")
    return request.param


@pytest.fixture(scope="session")
def any_backend():
    """The first installed back end (numba-cuda-mlir preferred), or a skip."""
    from udf._pycompile import backend_available
    reasons = []
    for be in ("numba-cuda-mlir", "numba-cuda"):
        ok, why = backend_available(be)
        if ok:
            return be
        reasons.append(why)
    pytest.skip("no Python UDF back end installed: " + "; ".join(reasons))


@pytest.fixture(scope="session")
def udf_tools():
    """(udfc, udf-link, kernel pack dir), found as the package finds them, or a skip."""
    import udf
    try:
        udfc, link = udf.tool_path("udfc"), udf.tool_path("udf-link")
    except udf.UdfToolError as e:
        pytest.skip(f"udf tools not found: {e} (set UDF_BIN_DIR)")
    pack = Path(os.environ.get("UDF_KERNEL_PACK_DIR") or link.resolve().parent.parent / "share" / "udf" / "kernels")
    if not (pack / "ivf_flat_v1.json").is_file():
        pytest.skip(f"no kernel pack in {pack} (set UDF_KERNEL_PACK_DIR)")
    return udfc, link, pack
