"""Exceptions and warnings of the `udf` package.

Every error the package raises on purpose derives from `UdfError`:

- `UdfCompileError`: a Python metric cannot be compiled; points at the user's Python file and
  line (`file:line:col: error: message`, then `note:` lines).
- `BackendUnavailableError` (also an `ImportError`): the Python compiler back end
  (numba-cuda-mlir or numba-cuda) is not installed; names the pip extra that installs it.
- `UdfToolError`: `udfc` or `udf-link` failed (or could not be found); carries the tool's
  diagnostics (`ToolDiagnostic`: severity, code such as UDF1001, file, line, column, message,
  notes), parsed from its JSON diagnostics.
- `UdfRuntimeError` (also a `RuntimeError`): a runtime call failed (no driver, no GPU, bad
  parameter, capture error, ...); carries the runtime's status (`status`, `status_name`) and
  its message.  The extension `udf._ext` raises it with the constructor
  `UdfRuntimeError(status: int, status_name: str, message: str)`.
- `NoDriverError` (a `UdfRuntimeError`, status UDF_ERROR_NO_DRIVER): the NVIDIA driver
  (libcuda.so.1) is missing or unusable, so no index can be built or searched here; compiling
  and linking still work.  The message says so and what to do, in two lines.

`UdfWarning` is the category of the warnings the package issues (float64 use in a Python metric,
tool warnings such as a fatbin packaging fallback); filter it with the `warnings` module.
`FrontEndWarning` (a `UdfWarning`) says that a Python metric left udf's fast front end for numba:
which construct, at which line, and how to stay on the fast path.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ._pycompile.errors import BackendUnavailableError, UdfCompileError, UdfError

__all__ = [
    "BackendUnavailableError", "FrontEndWarning", "NoDriverError", "Status", "ToolDiagnostic", "UdfCompileError",
    "UdfError", "UdfRuntimeError", "UdfToolError", "UdfWarning",
]


class UdfWarning(UserWarning):
    """Warnings issued by the udf package (Python metric typing, udfc / udf-link warnings)."""


class FrontEndWarning(UdfWarning):
    """A Python metric or filter that udf's own front end ("nvrtc", no numba import) cannot
    translate, so `backend="auto"` compiles it with numba, which costs seconds of import in a new
    process.  Issued at the line of the construct, with the rewrite that keeps the fast path;
    passing a numba back end by name (`backend="numba-cuda-mlir"`) says the choice is deliberate
    and silences it."""


class Status(enum.IntEnum):
    """The runtime's status codes (`udf_status` in include/udf/runtime.h)."""

    OK = 0
    INVALID_ARGUMENT = 1
    NO_DRIVER = 2
    NO_DEVICE = 3
    CUDA = 4
    OUT_OF_MEMORY = 5
    IO = 6
    BAD_FORMAT = 7
    MISMATCH = 8
    NO_BINARY_FOR_GPU = 9
    CAPTURE = 10
    UNSUPPORTED = 11
    NOT_IMPLEMENTED = 12
    INTERNAL = 13

    @property
    def c_name(self) -> str:
        """The C name, as udf_status_name() gives it: "UDF_OK", "UDF_ERROR_CAPTURE", ..."""
        return "UDF_OK" if self is Status.OK else f"UDF_ERROR_{self.name}"


class UdfRuntimeError(UdfError, RuntimeError):
    """A runtime call failed.

    Attributes: `status` (int, a `Status` value when known), `status_name` (the C name, e.g.
    "UDF_ERROR_NO_DRIVER") and `message` (the runtime's one-line message, naming the parameter,
    capture, file or CUDA call at fault).  str(): "UDF_ERROR_NAME: message".
    """

    def __init__(self, status: int, status_name: str, message: str):
        try:
            self.status: int = Status(int(status))
        except ValueError:
            self.status = int(status)
        self.status_name = status_name
        self.message = message
        super().__init__(f"{status_name}: {message}")

    @classmethod
    def of(cls, status: Status, message: str) -> "UdfRuntimeError":
        """An error the Python layer detects itself, reported like the runtime would."""
        return cls(int(status), status.c_name, message)

    def __reduce__(self):
        return (type(self), (int(self.status), self.status_name, self.message))


class NoDriverError(UdfRuntimeError):
    """The NVIDIA driver (libcuda.so.1) is missing or unusable (UDF_ERROR_NO_DRIVER): indexes
    cannot be built, loaded or searched here.  udf.compile and udf.link need no driver.

    `message` is two lines: what is wrong (and that compiling and linking still work), then a
    `note:` saying what to do, with the loader's or the driver's own words."""

    @classmethod
    def from_runtime(cls, runtime_message: str) -> "NoDriverError":
        """The error for the runtime's NO_DRIVER message ("no CUDA driver: cannot load
        libcuda.so.1 (why)", "the CUDA driver libcuda.so.1 is too old: ...", "cuInit failed: ...")."""
        m = re.search(r"cannot load libcuda\.so\.1 \((.*)\)\s*$", runtime_message, re.S)
        if m:
            what = "the NVIDIA driver (libcuda.so.1) was not found"
            fix = f"install the NVIDIA driver on a machine with an NVIDIA GPU and run there (dlopen: {m.group(1)})"
        else:
            what = f"the NVIDIA driver (libcuda.so.1) cannot be used ({runtime_message.strip()})"
            fix = "update the NVIDIA driver, and check that this machine's GPU is visible (nvidia-smi)"
        return cls(int(Status.NO_DRIVER), Status.NO_DRIVER.c_name,
                   f"{what}: building and searching indexes need it (udf.compile and udf.link do not)\n"
                   f"note: {fix}")


@dataclass(frozen=True)
class ToolDiagnostic:
    """One diagnostic of udfc / udf-link (docs/diagnostics.md, JSON format)."""

    severity: str  # "error" or "warning"
    message: str
    code: str | None = None  # "UDF1001", ...
    file: str | None = None
    line: int | None = None
    column: int | None = None
    notes: tuple[str, ...] = ()
    tool: str | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "ToolDiagnostic":
        return cls(severity=str(obj.get("severity") or "error"), message=str(obj.get("message") or ""),
                   code=obj.get("code"), file=obj.get("file"), line=obj.get("line"),
                   column=obj.get("column"), notes=tuple(obj.get("notes") or ()), tool=obj.get("tool"))

    def format(self) -> str:
        """clang style: `file:line:col: error: message [UDF1001]`, then `note:` lines."""
        if self.file:
            loc = self.file + "".join(f":{v}" for v in (self.line, self.column) if v is not None)
        else:
            loc = self.tool or "udf"
        text = f"{loc}: {self.severity}: {self.message}"
        if self.code:
            text += f" [{self.code}]"
        return "\n".join([text] + [n if n.startswith(">>>") else f"note: {n}" for n in self.notes])

    def __str__(self) -> str:
        return self.format()


class UdfToolError(UdfError):
    """udfc or udf-link failed, or could not be found / run.

    Attributes: `tool` ("udfc" / "udf-link"), `returncode` (None when it did not run),
    `diagnostics` (list of ToolDiagnostic, errors and warnings in the order reported), `output`
    (the tool's other stderr text), `command` (the argument list).  `filename`, `lineno`, `col`,
    `code` and `message` are those of the first error (None when unknown).  str() is the
    context line followed by every diagnostic, clang style.
    """

    def __init__(self, tool: str, summary: str, *, returncode: int | None = None,
                 diagnostics: Sequence[ToolDiagnostic] = (), output: str = "",
                 command: Sequence[str] = ()):
        self.tool = tool
        self.summary = summary
        self.returncode = returncode
        self.diagnostics = list(diagnostics)
        self.output = output
        self.command = list(command)
        first = next((d for d in self.diagnostics if d.severity == "error"),
                     self.diagnostics[0] if self.diagnostics else None)
        self.message = first.message if first else summary
        self.filename = first.file if first else None
        self.lineno = first.line if first else None
        self.col = first.column if first else None
        self.code = first.code if first else None
        super().__init__(self._text())

    def _text(self) -> str:
        lines = [self.summary]
        lines += [d.format() for d in self.diagnostics]
        if not self.diagnostics and self.output.strip():
            lines.append(self.output.strip())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._text()

    def __reduce__(self):
        return (_rebuild_tool_error, (self.tool, self.summary, self.returncode, self.diagnostics,
                                      self.output, self.command))


def _rebuild_tool_error(tool, summary, returncode, diagnostics, output, command):
    return UdfToolError(tool, summary, returncode=returncode, diagnostics=diagnostics, output=output,
                        command=command)
