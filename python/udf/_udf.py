"""What metrics and filters share: the declaration base (`Udf`), their inputs (CUDA / IR source),
warnings, captures, and the Python front end's on-disk cache.

`Udf` is the base of `Metric` (udf._metric) and `Filter` (udf._filter): a declaration that
compiles to an `Artifact` once per set of archs and process.  `PythonUdf` adds what a UDF written
in Python needs: the choice of front end (udf's translator or numba), the typing at decoration,
LTO-IR per arch, and the front-end cache.

The front-end cache keeps, for a Python UDF, the artifact udfc made (from the translator's C++
or numba's LTO-IR), keyed by everything the compile depends on (`FrontEndKey`): the function's
code object (and those of the code objects and functions it refers to), its defaults and
closure, the module-level names it reads, the declaration (udfc's flags: types, captures, order,
...), the back end and its version, the Python and udf versions, and the archs.  A new process that declares the same function then
imports no numba and runs no compiler: the artifact comes from the cache, and so does the
decoration-time check (its warnings are replayed).  Entries live under
`$UDF_CACHE_DIR/python/v1` (else `$XDG_CACHE_HOME/udf/python/v1`, else `~/.cache/udf/python/v1`),
one file each, written atomically (temp file + rename) and checked by a SHA-256 on reading, so
that concurrent writers and killed processes never leave a wrong entry (a bad one is a miss and
is rewritten).  `UDF_PYTHON_CACHE=0` turns it off.  A function whose inputs cannot be keyed (a
closure or global holding an object udf does not know) is compiled every time.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import struct
import sys
import tempfile
import threading
import types
import warnings
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import _cuda, _tools
from ._artifact import Artifact, ArchList, UdfDeclaration, arch_flag, archs_or_default
from ._pycompile.compile import BACKENDS, DEFAULT_BACKEND
from ._pycompile.errors import UdfCompileError
from ._pycompile.spec import CaptureSpec, parse_captures
from .errors import FrontEndWarning, UdfWarning
from . import _arrays
import numpy as np
from importlib import metadata
from ._pycompile.errors import BackendUnavailableError
from ._pycompile.compile import PyTypingResult

#: what @udf.metric / @udf.filter take as backend=: "auto" (default: "nvrtc" when udf's translator
#: takes the function, else the numba back end), "nvrtc", or a numba back end
BACKEND_CHOICES = ("auto", "nvrtc", *BACKENDS)

# ------------------------------------------------------------------------------ inputs


def cuda_input(source: str | os.PathLike) -> tuple[str | None, Path | None]:
    """(text, None) for CUDA source text, (None, path) for a path."""
    if isinstance(source, os.PathLike):
        return None, Path(os.fspath(source))
    if isinstance(source, str):
        return source, None
    raise TypeError(f"source must be CUDA source text (str) or a path, got {type(source).__name__}")


IR_KINDS = {"mlir": ".mlir", "llvm": ".ll", "ltoir": ".ltoir"}
_SUFFIX_KIND = {".mlir": "mlir", ".ll": "llvm", ".bc": "llvm", ".ltoir": "ltoir"}


def ir_kind(data: bytes, suffix: str | None = None) -> str:
    """"mlir", "llvm" or "ltoir": from the file suffix, else from the content (LLVM bitcode or
    LTO-IR magic, `define` / `target triple` for LLVM IR text, `func.func` / `module` for MLIR)."""
    if suffix and suffix.lower() in _SUFFIX_KIND:
        return _SUFFIX_KIND[suffix.lower()]
    if data[:4] in (b"BC\xc0\xde", b"\xde\xc0\x17\x0b"):
        return "llvm"
    if data[:4] == b"\xed\x43\x4e\x7f":
        return "ltoir"
    text = data.decode("utf-8", "replace")
    if re.search(r"^\s*(define|declare)\b|^\s*target\s+(triple|datalayout)\b", text, re.M):
        return "llvm"
    if re.search(r"\b(func\.func|llvm\.func)\b|^\s*module\b", text, re.M):
        return "mlir"
    raise ValueError("cannot tell whether this IR is MLIR or LLVM IR: pass kind='mlir' or kind='llvm'")


def ir_input(path_or_text: str | bytes | os.PathLike, kind: str | None) -> tuple[bytes | None, Path | None, str]:
    """(data, path, kind) of ir_metric / ir_filter's argument: data is None for a file (a path, or
    a str naming an existing file), else the text's or the bytes' content; kind defaults to the
    file suffix, else the content (ir_kind)."""
    path = None
    if isinstance(path_or_text, os.PathLike) or (isinstance(path_or_text, str) and "\n" not in path_or_text
                                                 and os.path.isfile(path_or_text)):
        path = Path(os.fspath(path_or_text))
        data = path.read_bytes()
    elif isinstance(path_or_text, str):
        data = path_or_text.encode()
    elif isinstance(path_or_text, (bytes, bytearray)):
        data = bytes(path_or_text)
    else:
        raise TypeError(f"path_or_text must be a path, IR text or bytes, got {type(path_or_text).__name__}")
    if kind is None:
        kind = ir_kind(data, path.suffix if path is not None else None)
    elif kind not in IR_KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(IR_KINDS)}")
    return (None if path is not None else data), path, kind


def ir_udfc_input(data: bytes | None, path: Path | None, kind: str, stem: str, tmp: str) -> str:
    """udfc's input for IR: the file itself, or the IR written into tmp as STEM + the kind's suffix."""
    if path is not None:
        return str(path.resolve())
    source = f"{stem}{IR_KINDS[kind]}"
    Path(tmp, source).write_bytes(data)
    return source


# ------------------------------------------------------------------------------ messages


_WARNING_RE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::\d+)?: warning: (?P<msg>.*)$", re.S)


def emit(text: str) -> None:
    """A _pycompile warning ("file:line: warning: msg") as a UdfWarning at that line."""
    m = _WARNING_RE.match(text)
    if m:
        _tools.warn(m.group("msg"), UdfWarning, filename=m.group("file"), lineno=int(m.group("line")))
    else:
        _tools.warn(text, UdfWarning, stacklevel=4)


def plain(exc: UdfCompileError) -> UdfCompileError:
    """The error without numba's exception chained to it (its text is in .backend_message)."""
    exc.__cause__ = None
    exc.__suppress_context__ = True
    return exc


# ------------------------------------------------------------------------------ captures


_NO_DEFAULT = object()


def to_host(value):
    """A capture value readable by NumPy (device arrays copied to the host)."""
    lib = _arrays.library(value)
    if lib == "cupy":
        return value.get()
    if lib == "torch":
        return value.detach().cpu().numpy()
    if lib in ("cai", "dlpack") and _arrays.device_of(value) >= 0:
        # cupy is optional: imported only for a device array
        import cupy
        return cupy.asarray(value).get()
    return value


def _snapshot(value, lib: str):
    """A host array declared as a capture default, as the declaration keeps it: a read-only copy
    (NumPy; a PyTorch CPU tensor: a clone), so that later changes to the caller's array reach
    neither the searches nor reference() (each index copies the declared value to its GPU once,
    udf._index.CaptureCopies).  A device array is kept as it is: searches read it in place."""
    if lib == "numpy":
        copy = np.array(value, copy=True)
    elif lib == "torch":
        if value.device.type != "cpu":
            return value
        return value.detach().clone()
    elif _arrays.device_of(value) >= 0:
        return value
    else:  # another host producer (DLPack, __array__)
        copy = np.array(np.from_dlpack(value) if lib == "dlpack" else value, copy=True)
    copy.setflags(write=False)
    return copy


def _capture(name: str, value) -> tuple[CaptureSpec, Any]:
    """(declaration, default value or _NO_DEFAULT) of one `captures={name: value}` entry."""

    if isinstance(value, (str, CaptureSpec)):
        return CaptureSpec.parse(name, value), _NO_DEFAULT
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        short = _arrays.NUMPY_TO_NAME.get(np.dtype(value).name)
        if short is None:
            raise ValueError(f"capture {name!r}: {np.dtype(value).name} is not a capture type "
                             f"(scalars: float32, int32; arrays: 'f32[]' 'f16[]' 'i32[]' 'u8[]')")
        return CaptureSpec(name, short, False), _NO_DEFAULT
    if _arrays.is_array(value):
        lib = _arrays.library(value)
        src = _arrays._dtype_of(value, lib)
        short = _arrays.array_dtype_name(value)
        if short is None and src == "bool":
            short = "u8"  # a mask: bound as uint8 (0 / 1), converted at each search
        if short is None or short in ("i8", "i64"):
            to = _capture_cast(src)
            fix = f": convert it, e.g. captures={{{name!r}: value.astype(np.{to})}}" if to else ""
            raise ValueError(f"capture {name!r}: arrays of {src} are not a capture type (float32, float16, int32, "
                             f"uint8){fix}")
        shape = _arrays._shape_of(value, lib)
        if len(shape) > 2 or (len(shape) == 2 and min(shape) > 1):  # (one row or one column reads as 1-D)
            raise ValueError(f"capture {name!r}: an array of shape {shape}; an array capture is 1-D (a metric's: "
                             f"one value per dimension): pass a 1-D array, e.g. value.ravel() or one row")
        return CaptureSpec(name, short, len(shape) > 0), _snapshot(value, lib)
    if isinstance(value, (list, tuple)):
        arr = np.asarray(value)
        if arr.dtype.kind == "f":
            arr = arr.astype(np.float32)
        elif arr.dtype.kind == "b":
            arr = arr.astype(np.uint8)
        elif arr.dtype.kind in "iu":
            arr = _arrays.as_array(value, what=f"capture {name!r}", dtype="i32").value
        else:
            raise ValueError(f"capture {name!r}: a list of {arr.dtype} is not a capture value")
        arr.setflags(write=False)
        return CaptureSpec(name, _arrays.NUMPY_TO_NAME[arr.dtype.name], True), arr
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"capture {name!r}: bool is not a capture type")
    if isinstance(value, (int, float, np.generic)):
        return CaptureSpec.parse(name, value), value
    raise ValueError(f"capture {name!r}: cannot declare a capture from a {type(value).__name__} (give a dtype "
                     f"spec like 'f32[]' or 'f32', an array, or a number)")


def _capture_cast(src: str | None) -> str | None:
    """The capture dtype an array of NumPy dtype `src` converts to: float32 for floats, int32 for
    integers; None for other kinds."""
    try:
        kind = np.dtype(src).kind
    except TypeError:
        return "float32" if src and "float" in src else None
    return {"f": "float32", "i": "int32", "u": "int32"}.get(kind)


def resolve_captures(captures) -> tuple[tuple[CaptureSpec, ...], dict[str, Any]]:
    """(declarations in ABI order, default values) of a `captures=` argument: a {name: value}
    mapping (see udf._metric) or a list of CaptureSpec."""
    if captures is None:
        return (), {}
    if not isinstance(captures, Mapping):
        return parse_captures(captures), {}
    specs, defaults = [], {}
    for name, value in captures.items():
        spec, default = _capture(name, value)
        specs.append(spec)
        if default is not _NO_DEFAULT:
            defaults[name] = default
    return parse_captures(specs), defaults


# ------------------------------------------------------------------------------ declarations


class Udf(UdfDeclaration):
    """A metric or filter declaration that compiles to an Artifact (base of Metric and Filter).

    Subclasses set `udf_kind` ("metric" / "filter") and `kind` (the source's kind in messages:
    "Python", "CUDA", "MLIR", ...), and define `_compile(archs)` and `_adopt(artifact)`.
    """

    kind = "UDF"
    udf_kind = ""

    def __init__(self, *, symbol: str | None, defaults: Mapping[str, Any]):
        # a UDF is declared to be searched on a GPU: its driver starts while the UDF compiles
        _cuda.start_early(declaration=True)
        self._symbol = symbol
        self._defaults = dict(defaults)
        self._artifacts: dict[tuple[int, ...], Artifact] = {}
        self._ahead_warnings: dict[tuple[int, ...], list] = {}  # PythonUdf._compile_ahead's, until compile() gives them
        self._lock = threading.RLock()

    @property
    def symbol(self) -> str | None:
        return self._symbol

    @property
    def capture_defaults(self) -> Mapping[str, Any]:
        return MappingProxyType(self._defaults)

    def compile(self, archs: ArchList | None = None) -> Artifact:
        """The Artifact for `archs` (ints or "sm_XX"; "all": udf.DEFAULT_ARCHS; default: the GPU's
        arch when there is one, else udf.DEFAULT_ARCHS), compiled once per
        set of archs and process (udfc's on-disk cache, and for Python UDFs the front-end cache,
        serve repeated compiles across processes).  Raises UdfCompileError, UdfToolError,
        BackendUnavailableError, TypeError or ValueError."""
        key = archs_or_default(archs)
        with self._lock:
            art = self._artifacts.get(key)
            if art is None:
                art = self._compile(key)
                self._adopt(art)
                self._artifacts[key] = art
            kept = self._ahead_warnings.pop(key, ())
        _tools.replay(kept, stacklevel=2)
        return art

    def _compile(self, archs: tuple[int, ...]) -> Artifact:
        raise NotImplementedError

    def _adopt(self, art: Artifact) -> None:
        raise NotImplementedError

    def _describe(self) -> str:
        return f"{self.kind} {self.udf_kind} {self._symbol!r}" if self._symbol else f"{self.kind} {self.udf_kind}"

    def _run_udfc(self, args: Sequence[str | os.PathLike], archs: tuple[int, ...], *, cwd) -> Artifact:
        """Runs udfc with `args` (inputs and flags) for `archs`; the artifact, with this
        declaration's capture defaults, checked to be of this declaration's kind."""
        out = Path(cwd) / f"{self._symbol or self.udf_kind}.udfa"
        _tools.run_tool("udfc", [*args, "--arch", arch_flag(archs), "-o", out],
                        what=f"compiling {self._describe()} for {arch_flag(archs)}", cwd=cwd)
        art = Artifact.load(out)
        if art.udf_kind != self.udf_kind:
            other, how = ("filter", "udf.cuda_source_filter / udf.ir_filter") if art.is_filter else \
                ("metric", "udf.cuda_source_metric / udf.ir_metric")
            said = "--kind filter" if art.is_filter else f"--kind {art.udf_kind}"
            raise TypeError(f"{self._describe()}: udfc compiled a {other} ('{art.symbol}'"
                            f"{', udf_kind filter: ' if art.is_filter else '; '}the source's first line says {said}), "
                            f"not a {self.udf_kind}; declare it with {how}")
        art.name = f"{art.symbol}.udfa"
        art._defaults = dict(self._defaults)
        return art


class PythonUdf:
    """Mixed into a Udf subclass (before it: class PythonMetric(PythonUdf, Metric)) for a UDF
    written in Python: the choice of front end, the typing at decoration, LTO-IR per arch, udfc
    packaging, and the front-end cache around all of them.

    Two front ends: udf's translator ("nvrtc": udf._pycompile.translate types the function with
    numba's rules and writes CUDA C++ that udfc compiles; no numba import) and numba (a numba back
    end makes LTO-IR that udfc packages).  `backend="auto"` takes the translator when the function
    is inside its subset, else DEFAULT_BACKEND, and says so once with a FrontEndWarning at the
    construct that left the subset; `"nvrtc"` insists (ValueError outside the subset).  This class
    owns that choice for metrics and filters alike.

    The class calls `_init_python(fn, backend)` after the Udf's own __init__ (with what
    `_translate()` reads already set), then `_decorated(check)`, and defines `_translate()` (the
    translator's result, with `.source`; raises NotInSubset or UdfCompileError), `_typing()` (the
    decoration-time check, numba's or the translator's: a PyTypingResult), `_ast_check()` (the AST
    rules alone, without a back end), `_compile_ltoir(archs)` (numba's LTO-IR: a result with
    .ltoir and .warnings) and `_udfc_flags()` (udfc's flags for the LTO-IR or the C++); the key
    covers `_spec`'s flags (the whole declaration numba compiles against);
    `_functions()` gives the Python functions the compile reads (the UDF and its finalize).

    Attributes: fn, backend (the front end that compiles it: "nvrtc" or a numba back end),
    nvrtc_unsupported (why "auto" did not take "nvrtc", or None), cuda_source (the translator's
    C++, or None), typing (the decoration-time PyTypingResult, or None).
    """

    kind = "Python"

    def _init_python(self, fn: Callable, backend: str) -> None:
        self.fn = fn
        self.nvrtc_unsupported: str | None = None
        self._translation = None
        self._off_fast_path = None
        if backend not in BACKEND_CHOICES:
            raise ValueError(f"backend {backend!r} is not one of {', '.join(BACKEND_CHOICES)}")
        if backend in ("auto", "nvrtc"):
            backend = self._pick_front_end(backend)
        self.backend = backend
        self.typing = None
        self._ltoir: dict[int, bytes] = {}
        self._warned: set[str] = set()
        self._key: FrontEndKey | None = None
        self._keyed = False

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    # -- the front ends
    def _translate(self):
        raise NotImplementedError

    def _pick_front_end(self, asked: str) -> str:
        """"nvrtc" when udf's translator takes the function, else (asked "auto") the numba back
        end, with the reason in nvrtc_unsupported (asked "nvrtc": a ValueError naming the construct
        and its rewrite, or the function's own UdfCompileError)."""
        # the translator (tens of ms to import) loads on first use: `import udf` does not pay for it
        from ._pycompile.translate import NotInSubset, fast_path_fix
        try:
            self._translation = self._translate()
            return "nvrtc"
        except (NotInSubset, UdfCompileError) as exc:
            if asked == "auto":
                self.nvrtc_unsupported = str(exc) if isinstance(exc, NotInSubset) else "the function has errors"
                if isinstance(exc, NotInSubset):
                    self._off_fast_path = exc  # warned once the function is known to compile (_decorated)
                return DEFAULT_BACKEND
            if isinstance(exc, UdfCompileError):
                raise plain(exc)
            fix = f": {fast_path_fix(exc)}" if exc.node is not None else ""
            raise ValueError(f"backend='nvrtc' cannot translate {getattr(self.fn, '__name__', 'the function')!r}: "
                             f"{exc}{fix}; backend='auto' (the default) compiles it with numba instead") from None

    def _decorated(self, check: bool) -> None:
        """The end of the decoration: the check (numba's or the translator's typing), then the
        warning of a function "auto" sent to numba."""
        if check:
            self._check()  # (its error, if any, is what to fix first: no warning before it)
        if self._off_fast_path is not None:
            self._warn_off_fast_path(self._off_fast_path)
        if self.backend == "nvrtc":  # (a numba back end's compile is left to the main thread)
            _cuda.after_arch(self._compile_ahead)

    def _compile_ahead(self, arch: int) -> None:
        """compile(arch) ahead of need, on a thread of udf._cuda.after_arch's once the early start
        knows the GPU's arch, so that the first Index.build finds the artifact made.  Its warnings
        wait for the compile() that returns the artifact (Udf.compile); a failure is dropped, its
        warnings unsaid, and that compile() compiles again, warns and raises."""
        key = archs_or_default((arch,))
        with self._lock:
            if key in self._artifacts:
                return
            warned = set(self._warned)
            try:
                with _tools.deferring_warnings() as kept:
                    art = self._compile(key)
                    self._adopt(art)
            except BaseException:
                self._warned = warned
                raise
            self._artifacts[key] = art
            self._ahead_warnings[key] = list(kept)

    def _warn_off_fast_path(self, exc) -> None:
        """A FrontEndWarning at the user's line for the construct that sends the function to numba
        (constructs without a line -- no source, ABI v2 -- have no fast path to keep)."""
        # the translator (tens of ms to import) loads on first use: `import udf` does not pay for it
        from ._pycompile.translate import construct_text, fast_path_fix
        if exc.node is None or exc.filename is None:
            return
        warnings.warn_explicit(
            f"`{construct_text(exc.node)}` is outside udf's fast front end, so {exc.function} compiles with "
            f"{DEFAULT_BACKEND} (seconds of numba import in each process that compiles it): {fast_path_fix(exc)} "
            f"(or pass backend='{DEFAULT_BACKEND}' to choose numba and silence this)",
            FrontEndWarning, exc.filename, exc.line)

    @property
    def cuda_source(self) -> str | None:
        """The CUDA C++ the nvrtc front end made of the function (None with a numba back end)."""
        return self._translation.source if self._translation is not None else None

    def _adopt(self, art: Artifact) -> None:
        pass  # the Python declaration is complete (and what numba compiles against)

    def _functions(self) -> tuple[Callable, ...]:
        return (self.fn,)

    def _udfc_flags(self) -> list[str]:
        raise NotImplementedError

    def _warn(self, texts: Iterable[str]) -> None:
        for t in texts:
            if t not in self._warned:
                self._warned.add(t)
                emit(t)

    def _front_end_key(self) -> FrontEndKey | None:
        """The key of this declaration's compiles (None: it cannot be keyed, or the cache is off)."""
        if not self._keyed:
            self._keyed = True
            if cache_enabled():
                self._key = FrontEndKey.of(self._functions(), kind=self.udf_kind, backend=self.backend,
                                           flags=self._spec.udfc_flags())
        return self._key

    def _check(self) -> None:
        """The decoration-time checks: the AST rules and numba's typing (errors at the user's
        lines).  A declaration the front-end cache has checked before replays its warnings and
        imports nothing.  Without the back end installed only the AST rules run; compiling will
        say which package to install."""
        key = self._front_end_key()
        if key is not None:
            cached = read_entry(key.typing())
            if cached is not None:
                t = cached[0]
                try:
                    self.typing = PyTypingResult(return_type=t["return_type"], finalize_return_type=t["finalize_return_type"],
                                                 warnings=list(t["warnings"]), spec=self._spec, backend=t["backend"],
                                                 backend_version=t["backend_version"])
                except (KeyError, TypeError):
                    self.typing = None
                if self.typing is not None:
                    self._warn(self.typing.warnings)
                    return
        try:
            self.typing = self._typing()
        except BackendUnavailableError:
            try:
                self._ast_check()
            except UdfCompileError as exc:
                raise plain(exc)
            return
        except UdfCompileError as exc:
            raise plain(exc)
        self._warn(self.typing.warnings)
        if key is not None:
            t = self.typing
            write_entry(key.typing(), {"return_type": t.return_type, "finalize_return_type": t.finalize_return_type,
                                       "warnings": list(t.warnings), "backend": t.backend,
                                       "backend_version": t.backend_version}, b"")

    def ltoir(self, archs: ArchList | None = None) -> dict[int, bytes]:
        """NVVM LTO-IR per arch (compiled once per arch and process)."""
        arch_list = archs_or_default(archs)
        with self._lock:
            missing = [a for a in arch_list if a not in self._ltoir]
            if missing:
                try:
                    res = self._nvrtc_ltoir(missing) if self.backend == "nvrtc" else self._compile_ltoir(missing)
                except UdfCompileError as exc:
                    raise plain(exc)
                self._warn(res.warnings)
                self._ltoir.update(res.ltoir)
            return {a: self._ltoir[a] for a in arch_list}

    def _nvrtc_ltoir(self, archs):
        """The nvrtc front end's LTO-IR: the artifact's payloads (udfc compiled it with NVRTC)."""
        return types.SimpleNamespace(ltoir=self.compile(tuple(archs)).ltoir(), warnings=[])

    def _compile_uncached(self, archs: tuple[int, ...]) -> Artifact:
        """The artifact from the front end: the translator's C++ compiled by udfc, or numba's
        LTO-IR packaged by udfc (the cache is _compile's)."""
        if self.backend == "nvrtc":
            self._warn(self._typing().warnings)  # (replayed once: check=False defers them here)
            with tempfile.TemporaryDirectory(prefix="udfc-") as tmp:
                return self._run_udfc(["-e", self._translation.source, *self._udfc_flags()], archs, cwd=tmp)
        code = self.ltoir(archs)
        with tempfile.TemporaryDirectory(prefix="udfc-") as tmp:
            inputs = []
            for arch, data in code.items():
                name = f"{self.symbol}.sm_{arch}.ltoir"
                Path(tmp, name).write_bytes(data)
                inputs.append(name)
            return self._run_udfc([*inputs, *self._udfc_flags()], archs, cwd=tmp)

    def _compile(self, archs: tuple[int, ...]) -> Artifact:
        key = self._front_end_key()
        entry = key.artifact(archs) if key is not None else None
        if entry is not None:
            cached = read_entry(entry)
            if cached is not None:
                header, data = cached
                try:
                    art = Artifact(data, header["manifest"], name=f"{self.symbol}.udfa",
                                   capture_defaults=self._defaults)
                except (KeyError, TypeError, ValueError):
                    art = None
                if art is not None and art.udf_kind == self.udf_kind and art.archs == tuple(sorted(archs)):
                    self._warn(header.get("warnings", ()))
                    return art
        before = set(self._warned)
        art = self._compile_uncached(archs)
        if entry is not None:
            write_entry(entry, {"manifest": art.manifest, "warnings": sorted(self._warned - before)}, art.data)
        return art


# ------------------------------------------------------------------------------ the front-end cache


class _Unkeyable(Exception):
    """A value the key cannot cover: the UDF is compiled every time."""


class FrontEndKey:
    """What a Python UDF's compile depends on, hashed (see the module docstring)."""

    VERSION = "udf.pyfront.v1"

    def __init__(self, digest: str):
        self.digest = digest

    @classmethod
    def of(cls, functions: Sequence[Callable], *, kind: str, backend: str, flags: Sequence[str]) -> "FrontEndKey | None":
        h = hashlib.sha256()
        feed = _Feeder(h)
        try:
            feed.value((cls.VERSION, _udf_version(), sys.version_info[:2], sys.implementation.name, kind, backend,
                        _backend_version(backend), tuple(flags)))
            for fn in functions:
                feed.value(fn)
        except _Unkeyable:
            return None
        return cls(h.hexdigest())

    def typing(self) -> str:
        """The entry of the decoration-time check."""
        return hashlib.sha256(f"{self.digest} typing".encode()).hexdigest()

    def artifact(self, archs: Sequence[int]) -> str:
        """The entry of the artifact for `archs`."""
        return hashlib.sha256(f"{self.digest} artifact {','.join(str(a) for a in sorted(archs))}".encode()).hexdigest()


class _Feeder:
    """Feeds a value's identity into a hash: code objects by their contents (recursively),
    functions by their code, defaults, closure and the globals they read, modules by name,
    numbers, strings and arrays by value.  Anything else is _Unkeyable."""

    def __init__(self, h):
        self.h = h
        self.seen: dict[int, int] = {}  # id -> position of functions and code objects fed (recursion)

    def put(self, tag: str, data: bytes = b"") -> None:
        self.h.update(struct.pack("<I", len(tag)) + tag.encode() + struct.pack("<Q", len(data)) + data)

    def value(self, v) -> None:
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            self.put(type(v).__name__, repr(v).encode())
        elif isinstance(v, (tuple, list, frozenset, set)):
            items = sorted(v, key=repr) if isinstance(v, (set, frozenset)) else v
            self.put(type(v).__name__, str(len(items)).encode())
            for x in items:
                self.value(x)
        elif isinstance(v, dict):
            self.put("dict", str(len(v)).encode())
            for k in sorted(v, key=repr):
                self.value(k)
                self.value(v[k])
        elif isinstance(v, np.ndarray):
            self.put("ndarray", f"{v.dtype.str} {v.shape}".encode() + np.ascontiguousarray(v).tobytes())
        elif isinstance(v, (np.generic, np.dtype)):
            self.put("numpy", repr(v).encode() + (v.tobytes() if isinstance(v, np.generic) else b""))
        elif isinstance(v, types.ModuleType):
            self.put("module", v.__name__.encode())
        elif isinstance(v, types.CodeType):
            self.code(v)
        elif isinstance(v, types.FunctionType):
            self.function(v)
        elif isinstance(v, type) or isinstance(v, types.BuiltinFunctionType):
            self.put("named", f"{getattr(v, '__module__', '')}.{getattr(v, '__qualname__', repr(v))}".encode())
        elif callable(getattr(v, "py_func", None)):  # a numba dispatcher (a device function the UDF calls)
            self.put("dispatcher", f"{type(v).__module__}.{type(v).__qualname__} {sorted(getattr(v, 'targetoptions', {}).items())!r}".encode())
            self.function(v.py_func)
        else:
            raise _Unkeyable(type(v).__name__)

    def code(self, co: types.CodeType) -> None:
        if id(co) in self.seen:
            self.put("code-again", str(self.seen[id(co)]).encode())
            return
        self.seen[id(co)] = len(self.seen)
        self.put("code", co.co_code)
        self.put("where", f"{co.co_filename}:{co.co_firstlineno} {co.co_qualname if hasattr(co, 'co_qualname') else co.co_name}".encode())
        self.value((co.co_argcount, co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags, co.co_names,
                    co.co_varnames, co.co_freevars, co.co_cellvars))
        self.value(tuple(co.co_consts))

    def function(self, fn: types.FunctionType) -> None:
        if id(fn) in self.seen:
            self.put("function-again", str(self.seen[id(fn)]).encode())
            return
        self.code(fn.__code__)
        self.seen[id(fn)] = len(self.seen)
        self.value(fn.__defaults__)
        self.value(fn.__kwdefaults__)
        cells = []
        for c in fn.__closure__ or ():
            try:
                cells.append(c.cell_contents)
            except ValueError:  # an empty cell
                cells.append(None)
        self.value(tuple(cells))
        # The module-level names the code reads (names of nested code objects included);
        # attribute names among co_names that are not globals are left out.
        names = sorted(_global_names(fn.__code__))
        g = fn.__globals__
        for n in names:
            if n in g:
                self.put("global", n.encode())
                self.value(g[n])


def _global_names(co: types.CodeType) -> set[str]:
    out = set(co.co_names)
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            out |= _global_names(c)
    return out


_versions: dict[str, str] = {}


def _backend_version(backend: str) -> str:
    """The back end's distributions and versions, from their metadata (no import)."""
    if backend == "nvrtc":  # udf's own translator (the NVRTC that compiles it is udfc's, in the udf version)
        # the translator (tens of ms to import) loads on first use: `import udf` does not pay for it
        from ._pycompile.translate import VERSION
        return VERSION
    if backend not in _versions:
        dists = {"numba-cuda-mlir": ("numba-cuda-mlir",), "numba-cuda": ("numba-cuda", "numba")}.get(backend, (backend,))
        parts = []
        for d in dists:
            try:
                parts.append(f"{d} {metadata.version(d)}")
            except metadata.PackageNotFoundError:
                parts.append(f"{d} none")
        _versions[backend] = ", ".join(parts)
    return _versions[backend]


def _udf_version() -> str:
    # udf/__init__.py imports this module before it sets __version__ (a cycle)
    from . import __version__
    return __version__


def cache_enabled() -> bool:
    return os.environ.get("UDF_PYTHON_CACHE", "1") not in ("0", "off", "no", "false")


def cache_dir() -> Path:
    """$UDF_CACHE_DIR, else $XDG_CACHE_HOME/udf (absolute only), else ~/.cache/udf; then python/v1."""
    base = os.environ.get("UDF_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = os.path.join(xdg, "udf") if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache", "udf")
    return Path(base) / "python" / "v1"


_MAGIC = b"UDFPY1\n"


def _entry_path(key: str) -> Path:
    return cache_dir() / key[:2] / key


def read_entry(key: str) -> tuple[dict, bytes] | None:
    """(header, payload) of an entry, or None: missing, unreadable or corrupt (then removed)."""
    path = _entry_path(key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    try:
        if not blob.startswith(_MAGIC):
            raise ValueError("magic")
        digest = blob[len(_MAGIC):len(_MAGIC) + 64].decode("ascii")
        body = blob[len(_MAGIC) + 65:]
        if hashlib.sha256(body).hexdigest() != digest:
            raise ValueError("checksum")
        header_len = struct.unpack("<Q", body[:8])[0]
        header = json.loads(body[8:8 + header_len].decode("utf-8"))
        if not isinstance(header, dict) or header.get("key") != key:
            raise ValueError("header")
        return header, body[8 + header_len:]
    except (ValueError, UnicodeDecodeError, struct.error):
        try:
            path.unlink()
        except OSError:
            pass
        return None


def write_entry(key: str, header: dict, payload: bytes) -> None:
    """Stores an entry atomically; a failure (a read-only cache, a full disk) only warns."""
    path = _entry_path(key)
    head = json.dumps({**header, "key": key}, sort_keys=True).encode("utf-8")
    body = struct.pack("<Q", len(head)) + head + payload
    blob = _MAGIC + hashlib.sha256(body).hexdigest().encode("ascii") + b"\n" + body
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{secrets.token_hex(8)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "xb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _tools.warn(f"udf: the Python front-end cache could not be written ({exc}); set UDF_PYTHON_CACHE=0 to "
                    f"turn it off", UdfWarning, stacklevel=3)
