"""Finding and running the command-line tools `udfc` and `udf-link`.

The Python API compiles and links by running the tools, so that it shares their on-disk cache
($UDF_CACHE_DIR, docs/cache.md), their checks and their diagnostics.  A tool is looked up, in
this order:

1. `$UDF_BIN_DIR` (when set, the tool must be there);
2. `<udf package>/bin` (a wheel: site-packages/udf/bin/udfc);
3. `<udf package>/../../bin` (the build tree: build/python/udf -> build/bin);
4. the `PATH` (shutil.which).

The tools find their kernel pack (share/udf/kernels) relative to themselves; the built-in
metrics are in share/udf/metrics next to it.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import warnings
from pathlib import Path
from typing import Iterator, Sequence

from .errors import ToolDiagnostic, UdfToolError, UdfWarning

TOOLS = ("udfc", "udf-link")
PACKAGE_DIR = Path(__file__).resolve().parent

# NVIDIA's CUDA 13 wheels wherever this interpreter sees them, for the tools this package runs and
# for libudf_runtime in this process ($UDF_CUDA_WHEEL_DIRS; _udf_console.py, beside the package).
try:
    from _udf_console import export_cuda_wheel_dirs as _export_cuda_wheel_dirs
except ImportError:  # the package copied somewhere without its console module
    pass
else:
    _export_cuda_wheel_dirs()


def candidate_dirs() -> list[tuple[str, Path | None]]:
    """(how, folder) in lookup order; folder None for the PATH."""
    out: list[tuple[str, Path | None]] = []
    env = os.environ.get("UDF_BIN_DIR")
    if env:
        out.append(("$UDF_BIN_DIR", Path(env)))
    out.append(("the udf package", PACKAGE_DIR / "bin"))
    out.append(("the build tree", PACKAGE_DIR.parent.parent / "bin"))
    out.append(("PATH", None))
    return out


def tool_path(name: str) -> Path:
    """The path of tool `name` ("udfc" or "udf-link"); raises UdfToolError saying where it looked."""
    looked = []
    for how, folder in candidate_dirs():
        if folder is None:
            found = shutil.which(name)
            if found:
                return Path(found)
            looked.append("PATH")
            continue
        path = folder / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
        looked.append(f"{path} ({how})")
        if how == "$UDF_BIN_DIR":  # an explicit setting is not silently ignored
            raise UdfToolError(name, f"{name}: not found in $UDF_BIN_DIR={folder} (no executable {path})")
    raise UdfToolError(name, f"{name}: not found; looked in: {', '.join(looked)}. Install the udf package "
                             f"(`pip install .`), or set UDF_BIN_DIR to the folder holding udfc and udf-link")


def share_dir() -> Path:
    """share/udf next to the tools (bin/../share/udf)."""
    return tool_path("udf-link").resolve().parent.parent / "share" / "udf"


def metrics_dir() -> Path:
    """The folder of the built-in metric artifacts (l2.udfa, inner_product.udfa, cosine.udfa):
    share/udf/metrics next to the kernel pack ($UDF_KERNEL_PACK_DIR/../metrics when that is set)."""
    pack = os.environ.get("UDF_KERNEL_PACK_DIR")
    if pack:
        return Path(pack).parent / "metrics"
    return share_dir() / "metrics"


def filters_dir() -> Path:
    """The folder of the built-in filter artifacts (bitmap.udfa): share/udf/filters next to the
    kernel pack ($UDF_KERNEL_PACK_DIR/../filters when that is set)."""
    pack = os.environ.get("UDF_KERNEL_PACK_DIR")
    if pack:
        return Path(pack).parent / "filters"
    return share_dir() / "filters"


# ------------------------------------------------------------------------------ warnings

# A thread's kept warnings (deferring_warnings), else None: warnings go out at once.
_kept = threading.local()


def warn(message: str, category: type[Warning], *, filename: str | None = None, lineno: int = 0,
         stacklevel: int = 1) -> None:
    """warnings.warn(message, category, stacklevel) as if called where this is called, or
    warn_explicit at `filename`:`lineno`; in a thread inside deferring_warnings, kept for
    replay instead."""
    kept = getattr(_kept, "list", None)
    if kept is not None:
        kept.append((message, category, filename, lineno))
    elif filename is not None:
        warnings.warn_explicit(message, category, filename, lineno)
    else:
        warnings.warn(message, category, stacklevel=stacklevel + 1)


@contextlib.contextmanager
def deferring_warnings() -> Iterator[list]:
    """Keeps this thread's `warn` calls in the list it gives, for `replay` by the thread that
    uses what was made (a compile run ahead of need, on a thread of its own)."""
    outer = getattr(_kept, "list", None)
    _kept.list = []
    try:
        yield _kept.list
    finally:
        _kept.list = outer


def replay(kept: Sequence[tuple], stacklevel: int = 1) -> None:
    """Gives the warnings deferring_warnings kept, in order."""
    for message, category, filename, lineno in kept:
        warn(message, category, filename=filename, lineno=lineno, stacklevel=stacklevel + 1)


def run_tool(name: str, args: Sequence[str | os.PathLike], *, what: str, cwd: str | os.PathLike | None = None,
             input: bytes | None = None) -> subprocess.CompletedProcess:
    """Runs tool `name` with `args` (+ JSON diagnostics); returns the CompletedProcess (bytes).

    Warnings the tool reports become UdfWarning warnings.  A failure raises UdfToolError with
    `what` (e.g. "udfc: compiling metric 'wl2'") as its first line and the tool's diagnostics.
    """
    exe = tool_path(name)
    cmd = [str(exe), *[os.fspath(a) for a in args], "--diagnostics-format", "json"]
    try:
        proc = subprocess.run(cmd, cwd=cwd, input=input, capture_output=True)
    except OSError as exc:
        raise UdfToolError(name, f"{what}: cannot run {exe}: {exc}", command=cmd) from exc
    diags, other = parse_diagnostics(proc.stderr.decode("utf-8", "replace"))
    if proc.returncode != 0:
        kind = {1: "failed", 2: "usage error", 3: "internal error"}.get(proc.returncode, "failed")
        raise UdfToolError(name, f"{what}: {name} {kind} (exit {proc.returncode})", returncode=proc.returncode,
                           diagnostics=diags, output=other, command=cmd)
    for d in diags:
        if d.severity != "error":
            warn(f"{name}: {d.format()}", UdfWarning, stacklevel=3)
    return proc


def parse_diagnostics(stderr: str) -> tuple[list[ToolDiagnostic], str]:
    """(the JSON diagnostics, the other lines) of a tool's stderr."""
    diags, other = [], []
    for line in stderr.splitlines():
        text = line.strip()
        if text.startswith("{"):
            try:
                obj = json.loads(text)
            except ValueError:
                obj = None
            if isinstance(obj, dict) and "severity" in obj and "message" in obj:
                diags.append(ToolDiagnostic.from_json(obj))
                continue
        other.append(line)
    return diags, "\n".join(other)


def inspect(path: str | os.PathLike) -> dict:
    """The manifest of an artifact (.udfa) or module (.udfm) file, validated by `udfc --inspect`."""
    proc = run_tool("udfc", ["--inspect", path], what=f"reading {os.fspath(path)}")
    try:
        return json.loads(proc.stdout)
    except ValueError as exc:
        raise UdfToolError("udfc", f"udfc --inspect {os.fspath(path)}: the output is not JSON ({exc})",
                           output=proc.stdout.decode("utf-8", "replace")) from exc
