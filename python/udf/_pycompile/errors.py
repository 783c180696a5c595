"""Exceptions of the Python -> LTO-IR layer.

`UdfCompileError` points at the user's Python source, clang style::

    /home/me/metrics.py:12:18: error: ctx has no field 'wieghts'; did you mean 'weights'?
    note: declared captures: weights (f32[]), p (f32); built-in fields: dim, n_dims

`BackendUnavailableError` says which compiler back end is missing and how to install it.

`UdfError` is the base of every exception the `udf` package raises on purpose (it lives here so
that this layer's errors derive from it without importing the rest of the package;
`udf.errors.UdfError` is the same class).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Diagnostic:
    """One located problem: `file:line[:col]: error: message`, then `note:` lines."""

    message: str
    filename: str | None = None
    lineno: int | None = None
    col: int | None = None  # 1-based, when known
    notes: tuple[str, ...] = ()
    severity: str = "error"

    def location(self) -> str:
        if self.filename is None:
            return "udf"
        loc = self.filename
        if self.lineno is not None:
            loc += f":{self.lineno}"
            if self.col is not None:
                loc += f":{self.col}"
        return loc

    def format(self) -> str:
        lines = [f"{self.location()}: {self.severity}: {self.message}"]
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class UdfError(Exception):
    """Base class of the errors the `udf` package raises (compile, tool, runtime errors)."""


class UdfCompileError(UdfError):
    """A Python UDF could not be compiled; points at the user's file and line.

    Attributes: `message`, `filename`, `lineno`, `col` (1-based or None), `notes`,
    `diagnostics` (every problem found, the first one being this error's own),
    `backend` (the compiler back end, when it was involved) and `backend_message`
    (the back end's own error text, ANSI colours stripped, or None).
    """

    def __init__(self, message: str, filename: str | None = None, lineno: int | None = None,
                 col: int | None = None, *, notes: tuple[str, ...] | list[str] = (),
                 diagnostics: list[Diagnostic] | None = None, backend: str | None = None,
                 backend_message: str | None = None):
        self.message = message
        self.filename = filename
        self.lineno = lineno
        self.col = col
        self.notes = tuple(notes)
        first = Diagnostic(message, filename, lineno, col, self.notes)
        self.diagnostics = [first] + [d for d in (diagnostics or [])[1:]]
        self.backend = backend
        self.backend_message = backend_message
        super().__init__(self.__str__())

    @classmethod
    def from_diagnostics(cls, diags: list[Diagnostic], **kw) -> "UdfCompileError":
        d = diags[0]
        return cls(d.message, d.filename, d.lineno, d.col, notes=d.notes, diagnostics=diags, **kw)

    def __str__(self) -> str:
        return "\n".join(d.format() for d in self.diagnostics)

    def __reduce__(self):  # keep it picklable (multiprocessing, pytest-xdist)
        return (_rebuild_error, (self.message, self.filename, self.lineno, self.col, self.notes,
                                 self.diagnostics, self.backend, self.backend_message))


def _rebuild_error(message, filename, lineno, col, notes, diagnostics, backend, backend_message):
    return UdfCompileError(message, filename, lineno, col, notes=notes, diagnostics=diagnostics,
                           backend=backend, backend_message=backend_message)


class BackendUnavailableError(UdfError, ImportError):
    """The requested compiler back end (numba-cuda or numba-cuda-mlir) cannot be imported."""

    def __init__(self, backend: str, extra: str, pip_hint: str, reason: str):
        self.backend = backend
        self.extra = extra
        self.pip_hint = pip_hint
        self.reason = reason
        super().__init__(
            f"the Python UDF back end '{backend}' is not available ({reason}); install it with "
            f"`pip install 'udf[{extra}]'` (or `pip install {pip_hint}`)")

    def __reduce__(self):  # picklable, like UdfCompileError
        return (type(self), (self.backend, self.extra, self.pip_hint, self.reason))


@dataclass
class _DiagList:
    """Collects diagnostics; raises them all at once."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, message, filename=None, lineno=None, col=None, notes=()):
        self.items.append(Diagnostic(message, filename, lineno, col, tuple(notes)))

    def raise_if_any(self, **kw):
        if self.items:
            items = sorted(self.items, key=lambda d: (d.lineno or 0, d.col or 0))
            raise UdfCompileError.from_diagnostics(items, **kw)
