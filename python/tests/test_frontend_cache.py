"""The Python front end's on-disk cache (udf._udf): a new process that declares the same UDF gets
its check and its artifact from the cache without importing numba; anything the compile depends
on changes the key; a corrupt entry is a miss and is rewritten; UDF_PYTHON_CACHE=0 turns it off.

Each case runs new Python processes (the thing cached is what a new process would redo), with
one cache folder of the test's own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import udf
from udf import _udf

BACKEND = "numba-cuda-mlir"


def _backend_ok():
    from udf._pycompile import backend_available
    return backend_available(BACKEND)[0]


needs_backend = pytest.mark.skipif(not _backend_ok(), reason=f"{BACKEND} is not installed")

PROGRAM = """
import json, sys
import numpy as np
import udf
SCALE = {scale}

@udf.metric(captures={{"weights": "f32[]"}}, backend="{backend}")
def cached_wl2(x, y, acc, ctx):
    d = (x - y) * SCALE
    return acc + ctx.weights[ctx.dim] * d * d

imported_at_decoration = sorted(m for m in ("numba", "numba_cuda_mlir", "numba.cuda") if m in sys.modules)
art = cached_wl2.compile([90])
print(json.dumps({{"decoration_imports": imported_at_decoration,
                   "compile_imports": sorted(m for m in ("numba", "numba_cuda_mlir") if m in sys.modules),
                   "return_type": cached_wl2.typing.return_type if cached_wl2.typing else None,
                   "artifact": art.data.hex(), "archs": list(art.archs), "symbol": art.symbol}}))
"""


def run(tmp_path: Path, scale="np.float32(2.0)", **env) -> dict:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM.format(scale=scale, backend=BACKEND))
    e = dict(os.environ, UDF_CACHE_DIR=str(tmp_path / "cache"), **env)
    e["PYTHONPATH"] = os.pathsep.join([str(Path(udf.__file__).parent.parent), e.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, str(script)], env=e, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "python" / "v1").glob("??/*"))


@needs_backend
def test_a_new_process_imports_no_numba(tmp_path):
    cold = run(tmp_path)
    assert "numba_cuda_mlir" in cold["compile_imports"]
    assert len(entries(tmp_path)) == 2  # the check and the sm_90 artifact
    warm = run(tmp_path)
    assert warm["decoration_imports"] == [] and warm["compile_imports"] == [], warm
    assert warm["artifact"] == cold["artifact"] and warm["archs"] == [90]
    assert warm["return_type"] == cold["return_type"] == "float32"


@needs_backend
def test_what_the_compile_reads_is_in_the_key(tmp_path):
    first = run(tmp_path)
    # A module-level constant the function reads.
    other = run(tmp_path, scale="np.float32(3.0)")
    assert "numba_cuda_mlir" in other["compile_imports"], "a changed global must compile again"
    assert other["artifact"] != first["artifact"]
    assert len(entries(tmp_path)) == 4
    # The first one is still there.
    again = run(tmp_path)
    assert again["compile_imports"] == [] and again["artifact"] == first["artifact"]


@needs_backend
def test_corrupt_entries_are_misses_and_rewritten(tmp_path):
    first = run(tmp_path)
    for f in entries(tmp_path):
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0xFF
        f.write_bytes(bytes(data))
    second = run(tmp_path)
    assert "numba_cuda_mlir" in second["compile_imports"]
    assert second["artifact"] == first["artifact"]
    third = run(tmp_path)
    assert third["compile_imports"] == [] and third["artifact"] == first["artifact"]


@needs_backend
def test_the_cache_can_be_turned_off(tmp_path):
    run(tmp_path, UDF_PYTHON_CACHE="0")
    assert entries(tmp_path) == []
    off = run(tmp_path, UDF_PYTHON_CACHE="0")
    assert "numba_cuda_mlir" in off["compile_imports"]


def test_key_covers_code_globals_closure_defaults_and_declaration():
    import numpy as np

    def make(scale, bias=1.0):
        w = np.arange(4, dtype=np.float32) * scale

        def f(x, y, acc, ctx, b=bias):
            return acc + w[0] * (x - y) + b
        return f

    def key(fn, flags=("--symbol", "f"), backend=BACKEND):
        k = _udf.FrontEndKey.of([fn], kind="metric", backend=backend, flags=list(flags))
        assert k is not None
        return k.digest

    base = key(make(1.0))
    assert key(make(1.0)) == base, "the same function, closure and defaults: the same key"
    assert key(make(2.0)) != base, "the closure's array"
    assert key(make(1.0, bias=2.0)) != base, "a default"
    assert key(make(1.0), flags=("--symbol", "f", "--monotone")) != base, "the declaration"
    assert key(make(1.0), backend="numba-cuda") != base, "the back end"
    k = _udf.FrontEndKey(base)
    assert k.artifact([90]) != k.artifact([80, 90]) and k.artifact([90, 80]) == k.artifact([80, 90])
    assert k.typing() not in (k.artifact([90]), base)


def test_unkeyable_functions_are_compiled_every_time():
    class Opaque:
        pass

    thing = Opaque()

    def f(x, y, acc, ctx):
        return acc + (x - y) if thing else acc
    assert _udf.FrontEndKey.of([f], kind="metric", backend=BACKEND, flags=[]) is None


def test_entries_are_checked_and_written_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("UDF_CACHE_DIR", str(tmp_path))
    key = "ab" + "0" * 62
    _udf.write_entry(key, {"manifest": {"x": 1}}, b"payload")
    header, payload = _udf.read_entry(key)
    assert header["manifest"] == {"x": 1} and payload == b"payload"
    path = tmp_path / "python" / "v1" / "ab" / key
    assert [p.name for p in path.parent.iterdir()] == [key], "no temp file left"
    # Another key's file under this name (a rename gone wrong) is a miss, and is removed.
    other = "ab" + "1" * 62
    _udf.write_entry(other, {}, b"")
    os.replace(path.parent / other, path)
    assert _udf.read_entry(key) is None and not path.exists()
    # Truncated: a miss.
    _udf.write_entry(key, {}, b"payload")
    path.write_bytes(path.read_bytes()[:-3])
    assert _udf.read_entry(key) is None
