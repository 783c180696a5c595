"""Artifacts (.udfa) and modules (.udfm) in memory, and `compile` / `link` / `load_module`.

An `Artifact` is one metric or filter compiled by udfc: LTO-IR per arch plus a manifest
(`udf_kind` "metric" or "filter").  A `Module` is one or more metrics, and any filters, linked
by udf-link with the IVF-Flat scan kernels: a fatbin plus a manifest; the runtime loads
modules.  Each metric gets unfiltered scans plus filtered ones for every filter (or only the
`pairs` asked for).  Both keep the file's bytes (`data`) and its manifest as a
dict (`manifest`, as `udfc --inspect` prints it), and save atomically.

Compiling and linking run the tools (udf._tools), so the Python API and the command line share
one on-disk cache: compiling or linking the same inputs again is a cache hit, wherever it
happens.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import _cuda, _tools
from ._files import write_atomic
from ._pycompile.compile import LTOIR_MAGIC
from ._pycompile.spec import CaptureSpec, parse_archs
import hashlib
from ._runtime import ext, runtime

#: archs compiled and linked for with archs="all", and when none are given on a machine without a
#: usable GPU: those the runtime's own index kernels ship machine code for (sm_80, sm_90, sm_100,
#: sm_120); each links into its own family.
DEFAULT_ARCHS = (80, 90, 100, 120)

ArchList = Iterable[int | str] | int | str

_gpu_archs: tuple[int, ...] | None = None


def _gpu_default_archs() -> tuple[int, ...]:
    """(the arch of GPU 0,) when the runtime extension and a GPU are there, else DEFAULT_ARCHS.
    The arch comes from the driver's early start (udf._cuda) when it is on, without waiting for
    the context it makes next; else from GPU 0's runtime."""
    global _gpu_archs
    if _gpu_archs is None:
        try:
            ext()
            _cuda.start_early(0)
            arch = _cuda.early_arch(0)
            _gpu_archs = parse_archs(arch if arch is not None else int(runtime(0).device_info()["arch"]))
        except Exception:  # no extension, no driver, no device: compile for every shipped arch
            _gpu_archs = DEFAULT_ARCHS
    return _gpu_archs


def archs_or_default(archs: ArchList | None) -> tuple[int, ...]:
    """Archs as sorted ints (80, "80", "sm_80" accepted); "all": DEFAULT_ARCHS; None: the arch of
    the GPU in use (GPU 0) when there is one, else DEFAULT_ARCHS (a CI job without a GPU)."""
    if archs is None:
        return _gpu_default_archs()
    if isinstance(archs, str) and archs == "all":
        return DEFAULT_ARCHS
    return parse_archs(archs)


def arch_flag(archs: Sequence[int]) -> str:
    return ",".join(f"sm_{a}" for a in archs)


def _arch_of(text: str) -> int:
    return int(text.removeprefix("sm_"))


@dataclass(frozen=True)
class MetricInfo:
    """What a compiled metric declares (from an artifact's or a module's manifest).

    symbol, elem ("f32" "f16" "i8" "u8"), acc ("f32" "i32"), order ("min" "max"), coarse_metric
    ("l2" "inner_product" "cosine"), initial (ABI v1: the accumulator's start value, a float; ABI
    v2: the state's initial words, a tuple, empty for the vector shape), finalize (symbol or
    None), captures (CaptureSpec in ABI order), source_name, cache_key (the artifact's), max_k
    (largest k, 0 when unknown), abi ("v1" or "v2"), shape (ABI v2: "state" or "vector"; None
    for v1), monotone (the manifest's "monotone": True when the metric was declared monotone,
    udfc --monotone; False when absent), coarse_weights (the capture that holds the coarse weights,
    udfc --coarse-weights; None when absent).
    """

    symbol: str
    elem: str
    acc: str
    order: str
    coarse_metric: str
    initial: float | tuple[float, ...]
    finalize: str | None
    captures: tuple[CaptureSpec, ...]
    source_name: str
    cache_key: str
    max_k: int = 0
    abi: str = "v1"
    shape: str | None = None
    monotone: bool = False
    coarse_weights: str | None = None

    @classmethod
    def from_manifest(cls, m: Mapping[str, Any], max_k: int = 0) -> "MetricInfo":
        caps = sorted(m.get("captures") or (), key=lambda c: c.get("index", 0))
        source = m.get("source_name") or (m.get("source") or {}).get("name") or ""
        abi_id = m.get("abi")
        if isinstance(abi_id, Mapping):
            abi_id = abi_id.get("id")
        shape = m.get("shape")
        # artifacts carry {"abi": {"id": ...}}; module manifests carry "shape" for v2 metrics only
        v2 = shape is not None or abi_id == "ivf_flat.metric.v2"
        raw = m.get("initial", () if v2 else 0.0)
        if v2:
            initial = tuple(float(v) for v in (raw if isinstance(raw, (list, tuple)) else [raw]))
        else:
            initial = float(raw)
        return cls(symbol=m["symbol"], elem=m["element_type"], acc=m["accumulator_type"], order=m["order"],
                   coarse_metric=m["coarse_metric"], initial=initial,
                   finalize=m.get("finalize"),
                   captures=tuple(CaptureSpec(c["name"], c["type"], c["kind"] == "array") for c in caps),
                   source_name=source, cache_key=m.get("cache_key", ""), max_k=max_k,
                   abi="v2" if v2 else "v1", shape=shape, monotone=m.get("monotone") is True,
                   coarse_weights=m.get("coarse_weights"))

    def capture(self, name: str) -> CaptureSpec | None:
        return next((c for c in self.captures if c.name == name), None)

    def describe_captures(self) -> str:
        return ", ".join(str(c) for c in self.captures) if self.captures else "none"


@dataclass(frozen=True)
class FilterInfo:
    """What a compiled filter declares (ABI ivf_flat.filter.v1; from an artifact's or a module's
    manifest): symbol, captures (CaptureSpec in ABI order; arrays of any length), source_name,
    cache_key (the artifact's)."""

    symbol: str
    captures: tuple[CaptureSpec, ...]
    source_name: str
    cache_key: str

    @classmethod
    def from_manifest(cls, m: Mapping[str, Any]) -> "FilterInfo":
        caps = sorted(m.get("captures") or (), key=lambda c: c.get("index", 0))
        source = m.get("source_name") or (m.get("source") or {}).get("name") or ""
        return cls(symbol=m["symbol"],
                   captures=tuple(CaptureSpec(c["name"], c["type"], c["kind"] == "array") for c in caps),
                   source_name=source, cache_key=m.get("cache_key", ""))

    def capture(self, name: str) -> CaptureSpec | None:
        return next((c for c in self.captures if c.name == name), None)

    def describe_captures(self) -> str:
        return ", ".join(str(c) for c in self.captures) if self.captures else "none"


class _Container:
    """Common part of Artifact and Module: bytes + manifest, save / load."""

    KIND = ""  # the manifest's "kind"
    SUFFIX = ""

    def __init__(self, data: bytes | None, manifest: Mapping[str, Any], *, name: str | None = None):
        if manifest.get("kind") != self.KIND:
            raise ValueError(f"{name or 'data'}: a {manifest.get('kind')!r}, not a {self.KIND!r}")
        self._data = bytes(data) if data is not None else None
        self.manifest = dict(manifest)
        self.name = name or f"{type(self).__name__.lower()}{self.SUFFIX}"

    @property
    def data(self) -> bytes:
        """The file's bytes."""
        return self._data

    @classmethod
    def load(cls, path: str | os.PathLike):
        """Reads and validates a file (udfc --inspect checks the container and the manifest)."""
        path = Path(os.fspath(path))
        manifest = _tools.inspect(path)
        obj = cls(path.read_bytes(), manifest, name=path.name)
        return obj

    @classmethod
    def from_bytes(cls, data: bytes, name: str | None = None):
        """From the bytes of a file (validated the same way as load())."""
        with tempfile.TemporaryDirectory(prefix="udf-") as tmp:
            path = Path(tmp) / f"input{cls.SUFFIX}"
            path.write_bytes(data)
            manifest = _tools.inspect(path)
        return cls(data, manifest, name=name)

    def save(self, path: str | os.PathLike) -> Path:
        """Writes the file atomically (temp file in the same folder + rename); returns the path."""
        return write_atomic(path, self.data)

    @property
    def archs(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def cache_key(self) -> str:
        return self.manifest.get("cache_key", "")

    def __len__(self) -> int:
        return len(self.data)

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.data == self.data

    def __hash__(self) -> int:
        return hash((type(self), self.cache_key))


class Artifact(_Container):
    """A compiled metric or filter (.udfa): LTO-IR per arch + manifest.

    Attributes: data (bytes), manifest (dict), name, udf_kind ("metric" or "filter"), info
    (MetricInfo, or FilterInfo for a filter), symbol, archs (ints), cache_key, capture_defaults
    (the values declared with the metric / filter, bound at search time).  Made by
    `udf.compile(metric_or_filter, archs)` / `.compile(archs)`, or `Artifact.load(path)`.
    """

    KIND = "udf.artifact"
    SUFFIX = ".udfa"

    def __init__(self, data: bytes, manifest: Mapping[str, Any], *, name: str | None = None,
                 capture_defaults: Mapping[str, Any] | None = None):
        super().__init__(data, manifest, name=name)
        self.udf_kind = self.manifest.get("udf_kind") or "metric"
        if self.udf_kind == "filter":
            self.info = FilterInfo.from_manifest(self.manifest)
        else:
            self.info = MetricInfo.from_manifest(self.manifest)
        self._defaults = dict(capture_defaults or {})

    @property
    def symbol(self) -> str:
        return self.info.symbol

    @property
    def archs(self) -> tuple[int, ...]:
        return tuple(sorted(_arch_of(t["arch"]) for t in self.manifest.get("targets", ())))

    @property
    def capture_defaults(self) -> Mapping[str, Any]:
        return MappingProxyType(self._defaults)

    def ltoir(self) -> dict[int, bytes]:
        """{arch: the LTO-IR payload} of each target, found in the file by the manifest's size and
        SHA-256 (every payload starts with LTO-IR's magic).  ValueError when one is missing."""
        data = self.data
        out: dict[int, bytes] = {}
        for t in self.manifest.get("targets", ()):
            size, want = int(t["size"]), t["sha256"]
            pos = data.find(LTOIR_MAGIC)
            while pos >= 0 and hashlib.sha256(data[pos:pos + size]).hexdigest() != want:
                pos = data.find(LTOIR_MAGIC, pos + 1)
            if pos < 0:
                raise ValueError(f"{self.name}: no payload of {size} bytes with SHA-256 {want} for {t['arch']}")
            out[_arch_of(t["arch"])] = data[pos:pos + size]
        return out

    @property
    def is_filter(self) -> bool:
        return self.udf_kind == "filter"

    def __repr__(self) -> str:
        if self.is_filter:
            return (f"<udf.Artifact filter {self.symbol!r} captures=[{self.info.describe_captures()}] "
                    f"archs={arch_flag(self.archs)} {len(self.data)} bytes>")
        abi = f" v2 {self.info.shape}" if self.info.abi == "v2" else ""
        mono = " monotone" if self.info.monotone else ""
        return (f"<udf.Artifact {self.symbol!r}{abi} {self.info.elem}/{self.info.acc} {self.info.order}{mono} "
                f"archs={arch_flag(self.archs)} {len(self.data)} bytes>")


class Module(_Container):
    """Linked metrics and filters (.udfm): a fatbin for some archs + manifest; what the runtime loads.

    Attributes: data (bytes), manifest (dict), name, metrics (MetricInfo per linked metric),
    symbols (the metrics'), filters (FilterInfo per linked filter), filter_symbols, pairs
    ((metric symbol, filter symbol) for every filtered scan linked), archs (ints), cache_key,
    on_demand.  Made by `udf.link([...], archs)`, or `udf.load_module(path)`.

    Index.build & co. link what they are given for the GPU's arch *on demand* (on_demand True):
    the runtime links each k bucket's scans when a search first needs them, the first one
    (k <= 32, the filtered scans of its filters too) in the background while the index builds,
    one link an entry, so that a search waits only for the entries it runs, and caches every
    entry on disk.  Such a module lists only the entries linked so far in
    `manifest`; its `data` (the whole module, every bucket) is linked, through the cache, when
    first asked for.
    """

    KIND = "udf.module"
    SUFFIX = ".udfm"

    def __init__(self, data: bytes | None, manifest: Mapping[str, Any], *, name: str | None = None,
                 capture_defaults: Mapping[str, Mapping[str, Any]] | None = None,
                 filter_capture_defaults: Mapping[str, Mapping[str, Any]] | None = None,
                 _on_demand: tuple[Sequence["Artifact"], int, Any] | None = None):
        """`data` None with `_on_demand` = (artifacts, device, the udf._ext.Module linking them on
        demand): a module of udf_module_link_ex (internal: Index.build & co. make them)."""
        super().__init__(data, manifest, name=name)
        arts = sorted(self.manifest.get("artifacts", ()), key=lambda a: a.get("index", 0))
        filts = sorted(self.manifest.get("filters", ()) or (), key=lambda f: f.get("index", 0))
        self._loaded: dict[int, Any] = {}  # device -> udf._ext.Module
        self._source: tuple["Artifact", ...] | None = None
        if _on_demand is not None:
            # Every bucket is linkable and every metric is linked with every filter.
            artifacts, device, ext_module = _on_demand
            self._source = tuple(artifacts)
            self._loaded[device] = ext_module
            max_k = {int(i): int(m["max_k"]) for i, m in enumerate(ext_module.metrics())}
            pairs = [(m["symbol"], f["symbol"]) for m in arts for f in filts]
        else:
            max_k: dict[int, int] = {}
            for e in self.manifest.get("entries", ()):
                if e.get("artifact") is not None:
                    a = int(e["artifact"])
                    max_k[a] = max(max_k.get(a, 0), int(e.get("launch", {}).get("k_max", 0)))
            metric_at = {int(a.get("index", i)): a["symbol"] for i, a in enumerate(arts)}
            filter_at = {int(f.get("index", i)): f["symbol"] for i, f in enumerate(filts)}
            pairs = []
            for e in self.manifest.get("entries", ()):
                if e.get("artifact") is not None and e.get("filter") is not None:
                    pair = (metric_at.get(int(e["artifact"]), "?"), filter_at.get(int(e["filter"]), "?"))
                    if pair not in pairs:
                        pairs.append(pair)
        self.metrics = tuple(MetricInfo.from_manifest(a, max_k.get(int(a.get("index", i)), 0))
                             for i, a in enumerate(arts))
        self.filters = tuple(FilterInfo.from_manifest(f) for f in filts)
        self.pairs = tuple(pairs)
        self._defaults = {s: dict(v) for s, v in (capture_defaults or {}).items()}
        self._filter_defaults = {s: dict(v) for s, v in (filter_capture_defaults or {}).items()}
        self._lock = threading.RLock()  # data (linked under it) is read under it by _runtime_module

    @property
    def on_demand(self) -> bool:
        """Whether the runtime links this module's k buckets on first use (see the class docstring)."""
        return self._source is not None

    @property
    def data(self) -> bytes:
        """The module file's bytes; for an on-demand module, the whole module (every k bucket)
        linked for its archs by udf-link when first asked for (the entries linked so far are
        cache hits)."""
        if self._data is None:
            with self._lock:
                if self._data is None:
                    self._data = _link_artifacts(self._source, self.archs).data
        return self._data

    def __eq__(self, other) -> bool:
        if type(other) is not type(self):
            return False
        if self.on_demand or other.on_demand:
            return self is other or (self.on_demand and other.on_demand and self.cache_key == other.cache_key)
        return other.data == self.data

    def __hash__(self) -> int:
        return hash((type(self), self.cache_key))

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(m.symbol for m in self.metrics)

    @property
    def archs(self) -> tuple[int, ...]:
        return tuple(sorted(_arch_of(a) for a in self.manifest.get("archs", ())))

    def metric(self, symbol: str | None = None) -> MetricInfo:
        """The metric named `symbol`; with None, the only one (ValueError listing them otherwise)."""
        if symbol is None:
            if len(self.metrics) != 1:
                raise ValueError(f"module {self.name} has {len(self.metrics)} metrics "
                                 f"({', '.join(self.symbols)}): choose one with metric=SYMBOL")
            return self.metrics[0]
        for m in self.metrics:
            if m.symbol == symbol:
                return m
        raise ValueError(f"module {self.name} has no metric {symbol!r} (it has: {', '.join(self.symbols)})")

    def capture_defaults(self, symbol: str) -> Mapping[str, Any]:
        """The capture values declared with metric `symbol` when it was linked from a Metric
        (empty for modules loaded from files)."""
        return MappingProxyType(self._defaults.get(symbol, {}))

    @property
    def filter_symbols(self) -> tuple[str, ...]:
        return tuple(f.symbol for f in self.filters)

    def filter(self, symbol: str) -> FilterInfo:
        """The filter named `symbol` (ValueError listing the module's filters otherwise)."""
        for f in self.filters:
            if f.symbol == symbol:
                return f
        have = ", ".join(self.filter_symbols) or "none"
        raise ValueError(f"module {self.name} has no filter {symbol!r} (its filters: {have})")

    def filters_for(self, metric: str) -> tuple[str, ...]:
        """The filters linked with metric `metric` (those a search with it may name)."""
        return tuple(f for m, f in self.pairs if m == metric)

    def filter_capture_defaults(self, symbol: str) -> Mapping[str, Any]:
        """The capture values declared with filter `symbol` when it was linked from a Filter
        (empty for modules loaded from files)."""
        return MappingProxyType(self._filter_defaults.get(symbol, {}))

    def _runtime_module(self, runtime, device: int):
        """The module loaded by `runtime` (a udf._ext.Runtime for `device`), loaded once."""
        with self._lock:
            mod = self._loaded.get(device)
            if mod is None or mod.runtime is not runtime:
                mod = runtime.load_module_bytes(self.data, self.name)
                self._loaded[device] = mod
            return mod

    def __repr__(self) -> str:
        filters = f" filters={list(self.filter_symbols)}" if self.filters else ""
        size = "linked on demand" if self._data is None else f"{len(self._data)} bytes"
        return f"<udf.Module {self.name!r} metrics={list(self.symbols)}{filters} archs={arch_flag(self.archs)} {size}>"



# ---------------------------------------------------------------------------------- operations


class UdfDeclaration:
    """The base of every metric and filter declaration (udf._udf.Udf: Metric, Filter): what
    compile, link and Index.build accept besides Artifacts, Modules and paths.  Declarations have
    `udf_kind` ("metric" / "filter"), `symbol`, `capture_defaults` and `compile(archs)`."""

    udf_kind = ""


def _is_udf(obj) -> bool:
    """A metric or filter declaration (Metric / Filter object)."""
    return isinstance(obj, UdfDeclaration)


def compile(metric, archs: ArchList | None = None) -> Artifact:  # noqa: A001 (the public name)
    """Compiles a metric (from @udf.metric, udf.cuda_source_metric or udf.ir_metric) or a filter
    (@udf.filter, udf.cuda_source_filter, udf.ir_filter) for `archs` (ints or "sm_XX"; "all":
    DEFAULT_ARCHS; default: the GPU's arch when there is one, else DEFAULT_ARCHS) with udfc.
    Returns an Artifact.

    Raises UdfCompileError (Python metrics: points at the user's line), UdfToolError (udfc's
    diagnostics, e.g. a CUDA compile error with its line), BackendUnavailableError, ValueError
    (a bad arch).  Results are cached per metric and archs; udfc's on-disk cache is used too.
    """
    if not _is_udf(metric):
        hint = " (decorate the function with @udf.metric or @udf.filter)" if callable(metric) else ""
        raise TypeError(f"udf.compile: expected a udf metric or filter, got {type(metric).__name__}{hint}")
    return metric.compile(archs)


def _as_artifact(item, archs: tuple[int, ...]) -> Artifact:
    if isinstance(item, Artifact):
        return item
    if _is_udf(item):
        return item.compile(archs)
    if isinstance(item, (str, os.PathLike)):
        return Artifact.load(item)
    hint = " (decorate the function with @udf.metric or @udf.filter)" if callable(item) else ""
    raise TypeError(f"udf.link: expected metrics, Artifacts or .udfa paths (of metrics or filters), got "
                    f"{type(item).__name__}{hint}")


def _pair_symbol(x, what: str) -> str:
    if isinstance(x, str):
        return x
    sym = getattr(x, "symbol", None)
    if isinstance(sym, str):
        return sym
    raise TypeError(f"udf.link: pairs: {what} must be a symbol (str) or a compiled metric / filter, got "
                    f"{type(x).__name__}")


def _parse_pairs(pairs) -> tuple[tuple[str, str], ...]:
    """pairs: (metric, filter) tuples of symbols or objects, or "METRIC:FILTER" strings."""
    if pairs is None:
        return ()
    if isinstance(pairs, str) or (isinstance(pairs, tuple) and len(pairs) == 2 and
                                  not any(isinstance(x, (tuple, list)) or (isinstance(x, str) and ":" in x)
                                          for x in pairs)):
        pairs = [pairs]  # one pair
    out = []
    for p in pairs:
        if isinstance(p, str):
            m, sep, f = p.partition(":")
            if not sep or not m or not f:
                raise ValueError(f"udf.link: pair {p!r} is not METRIC:FILTER")
        else:
            try:
                m, f = p
            except (TypeError, ValueError):
                raise TypeError(f"udf.link: a pair is (metric, filter) or 'METRIC:FILTER', got {p!r}") from None
            m, f = _pair_symbol(m, "the metric"), _pair_symbol(f, "the filter")
        out.append((m, f))
    return tuple(out)


def link(items, archs: ArchList | None = None, *, pairs=None, max_k: int | None = None) -> Module:
    """Links metrics, filters, Artifacts and/or .udfa paths (one item or a list) with the
    IVF-Flat kernel pack into a Module for `archs` ("all": DEFAULT_ARCHS; default: the GPU's arch
    when there is one, else DEFAULT_ARCHS), with udf-link.
    Metrics and filters are compiled first.  Symbols must differ.

    Every metric gets unfiltered scans plus filtered scans for every filter, unless `pairs`
    names the (metric, filter) combinations to link: tuples of symbols or objects, or
    "METRIC:FILTER" strings (udf-link --pair).  At least one metric is needed.  `max_k`
    links only the scans searches up to that k need (udf-link --max-k; default: every k
    bucket, up to 1024).  Each entry is linked and cached on its own.
    Raises UdfToolError with udf-link's diagnostics on failure."""
    arch_list = archs_or_default(archs)
    if isinstance(items, (str, os.PathLike)) or not isinstance(items, Iterable):
        items = [items]
    artifacts = [_as_artifact(i, arch_list) for i in items]
    if not artifacts:
        raise ValueError("udf.link: nothing to link")
    pair_list = _parse_pairs(pairs)  # after compiling: CUDA / IR objects know their symbols then
    if max_k is not None and (isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1):
        raise ValueError(f"udf.link: max_k must be a positive int, got {max_k!r}")
    return _link_artifacts(artifacts, arch_list, pair_list, max_k)


def _link_artifacts(artifacts: Sequence[Artifact], archs: tuple[int, ...],
                    pairs: Sequence[tuple[str, str]] = (), max_k: int | None = None) -> Module:
    metrics = [a for a in artifacts if not a.is_filter]
    if not metrics:
        raise TypeError(f"udf.link: {', '.join(a.symbol for a in artifacts)} "
                        f"{'is a filter' if len(artifacts) == 1 else 'are filters'}; a module needs at least "
                        f"one metric, which the filters are applied to (link [metric, filter, ...])")
    name = f"{metrics[0].symbol}.udfm" if len(artifacts) == 1 else "module.udfm"
    unique = len({a.name for a in artifacts}) == len(artifacts)
    with tempfile.TemporaryDirectory(prefix="udf-link-") as tmp:
        inputs = [a.name if unique else f"{i}_{a.name}" for i, a in enumerate(artifacts)]
        for a, file in zip(artifacts, inputs):
            (Path(tmp) / file).write_bytes(a.data)
        symbols = ", ".join(a.symbol for a in artifacts)
        pair_args = [arg for m, f in pairs for arg in ("--pair", f"{m}:{f}")]
        if max_k is not None:
            pair_args += ["--max-k", str(max_k)]
        _tools.run_tool("udf-link", [*inputs, *pair_args, "-o", name, "--arch", arch_flag(archs)],
                        what=f"linking {symbols} for {arch_flag(archs)}", cwd=tmp)
        out = Path(tmp) / name
        manifest = _tools.inspect(out)
        data = out.read_bytes()
    return Module(data, manifest, name=name,
                  capture_defaults={a.symbol: a.capture_defaults for a in metrics},
                  filter_capture_defaults={a.symbol: a.capture_defaults for a in artifacts if a.is_filter})


def load_module(path: str | os.PathLike) -> Module:
    """Reads a module file (.udfm) made by udf-link or Module.save()."""
    return Module.load(path)


def load_container(path: str | os.PathLike) -> Artifact | Module:
    """An artifact or a module file, whichever it is."""
    manifest = _tools.inspect(path)
    cls = Module if manifest.get("kind") == Module.KIND else Artifact
    return cls(Path(os.fspath(path)).read_bytes(), manifest, name=Path(os.fspath(path)).name)


def _kind_of(item) -> str | None:
    """"metric" / "filter" for Metric, Filter and Artifact objects, None otherwise."""
    return getattr(item, "udf_kind", None) if (_is_udf(item) or isinstance(item, Artifact)) else None


def capture_defaults_of(obj, symbol: str, kind: str = "metric") -> Mapping[str, Any]:
    """The capture values declared with metric (kind "filter": filter) `symbol` in what was
    given to Index.build & co. (a metric, a filter, an Artifact, a Module, or a list of them);
    empty when none were declared."""
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    for item in items:
        if isinstance(item, Module):
            if kind == "metric" and symbol in item.symbols:
                return item.capture_defaults(symbol)
            if kind == "filter" and symbol in item.filter_symbols:
                return item.filter_capture_defaults(symbol)
        elif _kind_of(item) == kind and item.symbol == symbol:
            return item.capture_defaults
    return MappingProxyType({})


_linked: dict[tuple, Module] = {}
_linked_lock = threading.Lock()


def module_and_items(obj, arch: int, runtime=None, device: int = 0, *,
                     make_runtime: Callable[[], Any] | None = None) -> tuple[Module, list | None]:
    """(Module, the artifacts it was linked from, or None when `obj` is a linked Module or a
    .udfm path) for one GPU arch, from what Index.build & co. accept: a Module (as is), a
    metric, an Artifact, a .udfa / .udfm path, or a list of metrics / filters / Artifacts /
    .udfa paths (linked together; every metric with every filter).  With `runtime` (a
    udf._ext.Runtime for `device`), or `make_runtime` (a function giving it, called once the
    artifacts are compiled), the artifacts are linked by it on demand (Module.on_demand:
    each k bucket when a search first needs it); without, by udf-link, every bucket.  Links are
    cached per process (keyed by the artifacts' cache keys, the arch and the runtime); capture
    defaults are not part of the key: take them from capture_defaults_of(obj, symbol)."""
    if isinstance(obj, Module):
        return obj, None
    if isinstance(obj, (str, os.PathLike)):
        loaded = load_container(obj)
        if isinstance(loaded, Module):
            return loaded, None
        obj = loaded
    items = list(obj) if isinstance(obj, (list, tuple)) else [obj]
    if any(isinstance(i, Module) for i in items):
        raise TypeError("a linked Module cannot be linked again with other metrics or filters: link the "
                        "metrics and filters together (udf.link([...])) or pass them (not the Module)")
    artifacts = [_as_artifact(i, (arch,)) for i in items]
    if make_runtime is not None:
        runtime = make_runtime()
    key = (tuple(a.cache_key for a in artifacts), arch, id(runtime) if runtime is not None else None)
    with _linked_lock:
        mod = _linked.get(key)
    if mod is None:
        mod = _link_on_demand(artifacts, arch, runtime, device) if runtime is not None else _link_artifacts(artifacts, (arch,))
        with _linked_lock:
            mod = _linked.setdefault(key, mod)
    return mod, artifacts


def _link_on_demand(artifacts: Sequence[Artifact], arch: int, runtime, device: int) -> Module:
    """The artifacts linked by `runtime` in memory, each k bucket on first use (Module.on_demand)."""
    metrics = [a for a in artifacts if not a.is_filter]
    if not metrics:
        raise TypeError(f"udf.link: {', '.join(a.symbol for a in artifacts)} "
                        f"{'is a filter' if len(artifacts) == 1 else 'are filters'}; a module needs at least "
                        f"one metric, which the filters are applied to (link [metric, filter, ...])")
    ext_module = runtime.link([a.data for a in artifacts], [a.name for a in artifacts], on_demand=True)
    name = f"{metrics[0].symbol}.udfm" if len(artifacts) == 1 else "module.udfm"
    return Module(None, json.loads(ext_module.manifest_json()), name=name,
                  capture_defaults={a.symbol: a.capture_defaults for a in metrics},
                  filter_capture_defaults={a.symbol: a.capture_defaults for a in artifacts if a.is_filter},
                  _on_demand=(artifacts, device, ext_module))


def module_for(obj, arch: int) -> Module:
    """The Module of module_and_items(obj, arch)."""
    return module_and_items(obj, arch)[0]
