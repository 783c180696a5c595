"""The console scripts `udfc`, `udf-link` and `udf-run` of the udf wheel.

pyproject.toml's [project.scripts] point here.  Each replaces this process (execv) with the
binary of the same name in the installed package (site-packages/udf/bin), the one the Python
API runs, so that arguments, exit status, signals and standard streams are the tool's own.  A
top-level module of its own, not part of `udf`: importing the package (numpy, the front ends)
would cost every command ~0.2 s.  Build systems that start many tools can call the binaries
directly: `python -c "import udf; print(udf.tool_path('udfc'))"` prints where they are.

It also owns `export_cuda_wheel_dirs()`, which the package calls on import: the tools find
NVIDIA's CUDA 13 wheels beside site-packages/udf by themselves, but where this Python sees them
in another folder of its path (a venv with --system-site-packages, `pip install --user` or
`--target`, PYTHONPATH), only the interpreter knows; $UDF_CUDA_WHEEL_DIRS tells the binaries.
"""
import os
import sys

WHEEL_DIRS_VAR = "UDF_CUDA_WHEEL_DIRS"


def cuda_wheel_dirs():
    """Every nvidia/cu13 folder (NVIDIA's CUDA 13 wheels) on this interpreter's sys.path, in order."""
    out = []
    for entry in sys.path:
        d = os.path.join(entry or os.getcwd(), "nvidia", "cu13")
        if d not in out and os.path.isdir(os.path.join(d, "lib")):
            out.append(d)
    return out


def export_cuda_wheel_dirs():
    """Sets $UDF_CUDA_WHEEL_DIRS (colon-separated) for this process and the tools it starts,
    unless it is set already (include/udf/support/cuda_libs.h reads it)."""
    if WHEEL_DIRS_VAR not in os.environ:
        dirs = cuda_wheel_dirs()
        if dirs:
            os.environ[WHEEL_DIRS_VAR] = os.pathsep.join(dirs)


def _run(name):
    # This module is installed beside the package (site-packages/_udf_console.py).
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "udf", "bin", name)
    if not os.access(path, os.X_OK):
        sys.stderr.write(f"{name}: {path} is missing or not executable: reinstall the udf wheel\n")
        return 127
    export_cuda_wheel_dirs()
    os.execv(path, [name] + sys.argv[1:])
    return 127  # not reached


def udfc():
    return _run("udfc")


def udf_link():
    return _run("udf-link")


def udf_run():
    return _run("udf-run")
