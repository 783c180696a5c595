"""The CUDA driver's early start (udf._cuda.start_early): a daemon thread that starts the driver
(cuInit, the device's arch, its primary context) once the package knows a GPU will be used, so
that the start runs while the metric compiles.

Each case runs a new Python process (the start happens once per process).  Without a GPU the
start must be harmless: no exception, no output, decoration works, the real use reports what it
always did.  UDF_CUDA_EARLY_START=0 starts no thread; a process starts at most one.  A fake
driver (a libcuda.so.1 compiled here, when there is a C compiler) lets the start succeed on a CPU
machine, to check the arch it reports, the hand-over of its context reference, and the waits at
fork and at exit.  On a GPU, a first search works with the start on, and gives the results of
one without it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import PYTHON_DIR, TESTS_DIR, ext_status

# Decorating metrics and a filter, the constructors that start the driver; then what the process
# saw, as one JSON line.
DECLARE = """
import json, sys, threading
import numpy as np
import udf
from udf import _cuda

@udf.metric
def l2(x, y, acc, ctx):
    d = x - y
    return acc + d * d

@udf.filter
def even(query, id, ctx):
    return id % 2 == 0

assert l2(1.0, 3.0, 0.5, None) == 4.5  # still the Python function
s = _cuda.early_start()
if s is not None:
    s.done.wait(60)
"""

REPORT = """
def report(**extra):
    s = _cuda.early_start()
    out = {"started": s is not None, "arch": s.arch if s else None, "retained": s.retained if s else None,
           "device": s.device if s else None, "done": s.done.is_set() if s else None}
    out.update(extra)
    print("RESULT " + json.dumps(out))
"""


def run(code: str, env: dict | None = None, timeout: float = 120, script: bool = False) -> tuple[dict, subprocess.CompletedProcess]:
    """Runs `code` in a new Python process with the package on its path; (the dict of its RESULT
    line, the process).  `script`: from a file instead of `python -c`, so that its metrics have
    source and udf's own translator compiles them (as in a user's script) without a numba back end."""
    e = dict(os.environ)
    path = [str(PYTHON_DIR), str(TESTS_DIR), *filter(None, e.get("PYTHONPATH", "").split(os.pathsep))]
    e["PYTHONPATH"] = os.pathsep.join(path)
    e.pop("UDF_CUDA_EARLY_START", None)
    e.update(env or {})
    with tempfile.TemporaryDirectory() as d:
        argv = [sys.executable, "-c", textwrap.dedent(code)]
        if script:
            argv = [sys.executable, str(Path(d) / "case.py")]
            Path(argv[1]).write_text(textwrap.dedent(code))
        p = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    return (json.loads(lines[-1][len("RESULT "):]) if lines else {}), p


# ------------------------------------------------------------------------------ without a GPU

NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # on a GPU machine too: the driver loads and sees no device


def test_harmless_without_a_gpu():
    """No driver (or no visible device): the start stops quietly; nothing is printed, the
    decoration works, and the real use reports what it reports without the start."""
    code = DECLARE + REPORT + """
error = None
if "--build" in sys.argv:
    try:
        udf.Index.build(l2, np.zeros((64, 8), np.float32), n_lists=2)
    except udf.UdfRuntimeError as exc:
        error = [type(exc).__name__, exc.status_name, str(exc)]
report(error=error)
"""
    res, p = run(code, NO_GPU)
    assert res["started"] and res["done"] and res["arch"] is None and res["retained"] is False
    assert p.stdout.startswith("RESULT ") and p.stdout.count("\n") == 1 and p.stderr == ""
    if ext_status()[0]:  # the runtime's own report, the same with the start on and off
        build = code.replace('"--build" in sys.argv', "True")
        on, p_on = run(build, NO_GPU)
        off, p_off = run(build, {**NO_GPU, "UDF_CUDA_EARLY_START": "0"})
        assert on["error"] is not None and on["error"][1] in ("UDF_ERROR_NO_DRIVER", "UDF_ERROR_NO_DEVICE")
        assert on["error"] == off["error"] and not off["started"]
        assert p_on.stderr == p_off.stderr == ""


@pytest.mark.parametrize("value", ["0", "off", "no", "false", " FALSE "])
def test_switch_starts_no_thread(value):
    """UDF_CUDA_EARLY_START=0 (off, no, false): no start, whatever declares or asks for a GPU."""
    code = DECLARE + REPORT + """
made = []
real_start = threading.Thread.start
def start(self):
    made.append(self.name)
    real_start(self)
threading.Thread.start = start
for make in (lambda: udf.builtin_metric("l2"), lambda: udf.builtin_filter("bitmap")):
    try:
        make()
    except udf.UdfError:  # a build without share/udf: the call got as far as the start
        pass
_cuda.start_early(); _cuda.start_early(1)
from udf._artifact import _gpu_default_archs
_gpu_default_archs()
report(threads=made, arch0=_cuda.early_arch(0))
"""
    res, p = run(code, {**NO_GPU, "UDF_CUDA_EARLY_START": value})
    assert not res["started"] and res["threads"] == [] and res["arch0"] is None
    assert p.stderr == ""


def test_starts_at_most_once():
    """Many declarations, builtins and calls from many threads: one start, for the first device
    asked for (device 0 for a declaration)."""
    code = """
import threading
from udf import _cuda
made = []
real_init = _cuda.EarlyStart.__init__
def init(self, device):
    made.append(device)
    real_init(self, device)
_cuda.EarlyStart.__init__ = init
""" + DECLARE + REPORT + """
for _ in range(3):
    @udf.metric
    def another(x, y, acc, ctx):
        return acc + x * y
try:
    udf.builtin_metric("inner_product")
except udf.UdfError:  # a build without share/udf
    pass
threads = [threading.Thread(target=_cuda.start_early, args=(i % 3,)) for i in range(16)]
for t in threads: t.start()
for t in threads: t.join()
report(made=made, same=_cuda.early_start() is s)
"""
    res, p = run(code, NO_GPU)
    assert res["made"] == [0] and res["same"] and res["device"] == 0
    assert p.stderr == ""


def test_dask_client_starts_on_an_index_only():
    """A process that imported udf.dask declares metrics for its workers: no start then; an
    index of its own starts the driver, for the index's device."""
    code = """
import json, sys
import numpy as np
import udf, udf.dask
from udf import _cuda
""" + REPORT + """
@udf.metric
def l2(x, y, acc, ctx):
    d = x - y
    return acc + d * d
declared = _cuda.early_start() is not None
error = None
try:
    udf.Index.build(l2, np.zeros((64, 8), np.float32), n_lists=2, device=1)
except (udf.UdfError, ImportError) as exc:  # no driver, no device (or no extension): after the start
    error = type(exc).__name__
report(declared=declared, error=error)
"""
    res, p = run(code, NO_GPU)
    assert not res["declared"] and res["started"] and res["device"] == 1 and res["error"]
    assert p.stderr == ""


# ------------------------------------------------------------------------------ a fake driver

FAKE_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
static int n_init, n_retain, n_release;
/* cuInit returns once the file $FAKE_CUDA_GATE exists (at most 30 s), when that is set */
static void wait_for_gate(void) {
  const char* gate = getenv("FAKE_CUDA_GATE");
  struct timespec t = {0, 10000000L};
  for (int i = 0; gate && i < 3000 && access(gate, F_OK) != 0; ++i) nanosleep(&t, 0);
}
int cuInit(unsigned flags) {
  (void)flags;
  wait_for_gate();
  ++n_init;
  const char* mark = getenv("FAKE_CUDA_MARK");
  if (mark) { FILE* f = fopen(mark, "w"); if (f) { fputs("cuInit returned\n", f); fclose(f); } }
  return 0;
}
int cuDeviceGet(int* dev, int ordinal) { if (ordinal != 0) return 101; *dev = 0; return 0; }
int cuDeviceGetAttribute(int* v, int attr, int dev) {
  (void)dev;
  if (attr == 75) { *v = 9; return 0; }
  if (attr == 76) { *v = 0; return 0; }
  return 1;
}
int cuDevicePrimaryCtxRetain(void** ctx, int dev) { (void)dev; ++n_retain; *ctx = (void*)0x1000; return 0; }
int cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; ++n_release; return 0; }
void fake_counts(int* out) { out[0] = n_init; out[1] = n_retain; out[2] = n_release; }
"""

# The fake cuInit waits for the gate file: open_gate(seconds) opens it that much later.
GATE = """
import os, threading, time
def open_gate(after_s):
    def go():
        time.sleep(after_s)
        open(os.environ["FAKE_CUDA_GATE"], "w").close()
    threading.Thread(target=go, daemon=True).start()
"""

COUNTS = """
import ctypes
def counts():
    out = (ctypes.c_int * 3)()
    ctypes.CDLL("libcuda.so.1").fake_counts(out)
    return list(out)
"""


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    """{"LD_LIBRARY_PATH": a folder whose libcuda.so.1 is a fake driver with one device, sm_90,
    first}: enough for the early start, too little for the runtime (which calls it too old) and
    for NVRTC (which crashes on it)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the fake driver")
    d = tmp_path_factory.mktemp("fake-cuda")
    (d / "fake_cuda.c").write_text(FAKE_DRIVER)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), str(d / "fake_cuda.c")], check=True)
    return {"LD_LIBRARY_PATH": os.pathsep.join([str(d), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])])}


def test_fake_driver_start_and_hand_over(fake_driver):
    """The start calls cuInit once, tells device 0's arch and retains its primary context; the
    runtime's hand-over releases that reference once; another device has no early arch."""
    code = DECLARE + REPORT + COUNTS + """
retained_before = _cuda.early_start().retained
before = counts()
_cuda.hand_over(1)  # not the started device: nothing
after_other = counts()
_cuda.hand_over(0); _cuda.hand_over(0)
report(before=before, after_other=after_other, after=counts(), arch1=_cuda.early_arch(1),
       retained_before=retained_before)
"""
    res, p = run(code, fake_driver)
    assert res["arch"] == 90 and res["retained_before"] and res["device"] == 0 and res["done"]
    assert res["before"] == [1, 1, 0] and res["after_other"] == [1, 1, 0] and res["after"] == [1, 1, 1]
    assert res["arch1"] is None and res["retained"] is False
    assert p.stderr == ""


def test_fake_driver_real_use_during_the_start(fake_driver, tmp_path):
    """The real use while cuInit is still running: the arch waits for the start; the runtime
    proceeds and reports the driver as it does without the start (the fake is too old for it)."""
    code = """
import json, time
import numpy as np
import udf
from udf import _cuda, _index
""" + REPORT + GATE + """
@udf.metric
def l2(x, y, acc, ctx):
    d = x - y
    return acc + d * d

t0 = time.perf_counter()
running = not _cuda.early_start().done.is_set()
open_gate(0.3)
arch = _index._device_arch(0)
waited = time.perf_counter() - t0
error = None
try:
    udf._runtime.runtime(0)
except udf.UdfRuntimeError as exc:
    error = [type(exc).__name__, exc.status_name]
report(running=running, arch_seen=arch, waited=waited, error=error)
"""
    if not ext_status()[0]:
        pytest.skip(ext_status()[1])
    res, p = run(code, {**fake_driver, "FAKE_CUDA_GATE": str(tmp_path / "gate")})
    assert res["running"] and res["arch_seen"] == 90 and res["waited"] >= 0.25
    assert res["error"] == ["NoDriverError", "UDF_ERROR_NO_DRIVER"]
    assert p.stderr == ""


def test_fake_driver_fork_waits_for_the_start(fake_driver, tmp_path):
    """os.fork right after a declaration waits until the start is done; the child forgets it."""
    code = """
import json, os, time, warnings
import udf
from udf import _cuda
warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12's about fork in a process with threads
""" + REPORT + GATE + """
@udf.metric
def l2(x, y, acc, ctx):
    d = x - y
    return acc + d * d

running = not _cuda.early_start().done.is_set()
r, w = os.pipe()
open_gate(0.3)
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    s = _cuda.early_start()
    os.write(w, json.dumps([s.done.is_set(), _cuda.early_arch(0), s.retained]).encode())
    os._exit(0)
forked_after = time.perf_counter() - t0
os.close(w)
child = json.loads(os.read(r, 1000))
os.waitpid(pid, 0)
report(running=running, child=child, forked_after=forked_after)
"""
    res, p = run(code, {**fake_driver, "FAKE_CUDA_GATE": str(tmp_path / "gate")})
    assert res["running"] and res["done"] and res["arch"] == 90 and res["forked_after"] >= 0.25
    assert res["child"] == [True, None, False]
    assert p.stderr == ""


def test_fake_driver_exit_waits_for_the_start(fake_driver, tmp_path):
    """A program that declares a metric and ends at once: its exit waits for the start, quietly."""
    mark = tmp_path / "mark"
    code = GATE + """
import udf
@udf.metric
def l2(x, y, acc, ctx):
    d = x - y
    return acc + d * d
open_gate(0.3)
"""
    _, p = run(code, {**fake_driver, "FAKE_CUDA_GATE": str(tmp_path / "gate"), "FAKE_CUDA_MARK": str(mark)})
    assert mark.read_text() == "cuInit returned\n"
    assert p.stdout == p.stderr == ""


def test_fake_driver_compiles_ahead(fake_driver):
    """Once the start knows the arch, a declaration of udf's own front end compiles for it on a
    thread of its own, so that the first Index.build finds the artifact made: compile() for that
    arch then runs no tool.  That compile's warnings wait for the compile() that returns its
    artifact, at the user's line."""
    code = """
import json, os, warnings
# udfc runs NVRTC, which would load the fake driver (this process found it at its start)
os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(os.environ["LD_LIBRARY_PATH"].split(os.pathsep)[1:])
import udf
from udf import _cuda, _tools
""" + REPORT + """
with warnings.catch_warnings(record=True) as ahead:
    warnings.simplefilter("always")

    @udf.metric(check=False)  # (the typing, and its warning, wait for the compile)
    def half_l1(x, y, acc, ctx):
        return acc + 0.5 * abs(x - y)  # float64

    _cuda.early_start().done.wait(60)
    _cuda._join_ahead(60)
made = (90,) in half_l1._artifacts
runs = []
real = _tools.run_tool
_tools.run_tool = lambda *a, **k: runs.append(a[0]) or real(*a, **k)
with warnings.catch_warnings(record=True) as given:
    warnings.simplefilter("always")
    art = half_l1.compile(archs=[90])
    again = half_l1.compile(archs=[90])
    runs.append("then sm_80")
    other = half_l1.compile(archs=[80])
report(backend=half_l1.backend, made=made, ahead=[str(w.message) for w in ahead], runs=runs,
       given=[[str(w.message), w.filename, w.lineno] for w in given], archs=list(art.archs), same=art is again,
       other=list(other.archs))
"""
    res, p = run(code, {**fake_driver, "UDF_PYTHON_CACHE": "0"}, script=True)
    assert res["backend"] == "nvrtc" and res["made"] and res["archs"] == [90] and res["same"]
    assert res["ahead"] == [], "the compile ahead warned on its own thread"
    assert res["runs"][0] == "then sm_80" and res["other"] == [80], "compile() for the early arch ran udfc again"
    assert len(res["given"]) == 1 and "np.float32" in res["given"][0][0], res["given"]
    line = 1 + next(i for i, t in enumerate(textwrap.dedent(code).splitlines()) if t.endswith("# float64"))
    assert res["given"][0][1].endswith("case.py") and res["given"][0][2] == line, res["given"]
    assert p.stderr == ""


def test_fake_driver_a_failed_compile_ahead_is_dropped(fake_driver, tmp_path):
    """A compile ahead that fails (a udfc that fails) leaves nothing behind: compile() compiles
    again, gives the declaration's warnings and raises."""
    (tmp_path / "udfc").write_text("#!/bin/sh\necho 'udfc: error: broken on purpose' >&2\nexit 1\n")
    (tmp_path / "udfc").chmod(0o755)
    code = """
import json, warnings
import udf
from udf import _cuda
""" + REPORT + """
with warnings.catch_warnings(record=True) as ahead:
    warnings.simplefilter("always")

    @udf.metric(check=False)
    def half_l1(x, y, acc, ctx):
        return acc + 0.5 * abs(x - y)  # float64

    _cuda.early_start().done.wait(60)
    _cuda._join_ahead(60)
made = bool(half_l1._artifacts)
error = None
with warnings.catch_warnings(record=True) as given:
    warnings.simplefilter("always")
    try:
        half_l1.compile(archs=[90])
    except udf.UdfToolError as exc:
        error = type(exc).__name__
report(made=made, ahead=[str(w.message) for w in ahead], given=[str(w.message) for w in given], error=error)
"""
    res, p = run(code, {**fake_driver, "UDF_PYTHON_CACHE": "0", "UDF_BIN_DIR": str(tmp_path)}, script=True)
    assert not res["made"] and res["ahead"] == [] and res["error"] == "UdfToolError"
    assert len(res["given"]) == 1 and "np.float32" in res["given"][0], res["given"]


def test_warnings_kept_by_a_thread_are_replayed_in_order():
    """_tools.deferring_warnings keeps the calling thread's warnings only; replay gives them."""
    import threading
    import warnings

    from udf import _tools
    from udf.errors import UdfWarning

    kept: list = []

    def ahead():
        with _tools.deferring_warnings() as k:
            _tools.warn("first", UdfWarning, filename="f.py", lineno=3)
            _tools.warn("second", UserWarning)
        kept.extend(k)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        t = threading.Thread(target=ahead)
        t.start()
        t.join()
        _tools.warn("now", UdfWarning)  # this thread defers nothing
        assert [str(w.message) for w in seen] == ["now"]
        _tools.replay(kept)
    assert [(str(w.message), w.category) for w in seen] == [("now", UdfWarning), ("first", UdfWarning),
                                                            ("second", UserWarning)]
    assert (seen[1].filename, seen[1].lineno) == ("f.py", 3)


# ------------------------------------------------------------------------------ on a GPU

FIRST_SEARCH = """
import json, time
import numpy as np
t0 = time.perf_counter()
import udf
from udf import _cuda
rng = np.random.default_rng(5)
data = rng.standard_normal((4000, 32), dtype=np.float32)
queries = rng.standard_normal((3, 32), dtype=np.float32)
weights = rng.uniform(0.5, 2.0, 32).astype(np.float32)

@udf.metric(captures={"weights": weights})
def early_wl2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d

index = udf.Index.build(early_wl2, data, n_lists=8)
dist, ids = index.search(queries, k=10, n_probes=8)  # every list: exact
first = time.perf_counter() - t0
ref = (((queries[:, None, :] - data[None, :, :]) ** 2) * weights).sum(-1)
s = _cuda.early_start()
print("RESULT " + json.dumps({"ids": ids.tolist(), "dist": dist.tolist(), "ref_best": np.sort(ref, 1)[:, :10].tolist(),
                              "started": s is not None, "early_arch": s.arch if s else None,
                              "arch": udf.device_info()["arch"], "retained": s.retained if s else None,
                              "first_result_s": first}))
"""


@pytest.mark.gpu
def test_first_search_with_the_early_start(ext):
    """A first search in a new process with the start on: exact results, the same as with it off;
    the start told the GPU's arch and handed its context over to the runtime."""
    on, p_on = run(FIRST_SEARCH, timeout=300, script=True)
    off, p_off = run(FIRST_SEARCH, {"UDF_CUDA_EARLY_START": "0"}, timeout=300, script=True)
    assert on["started"] and on["early_arch"] == on["arch"] and on["retained"] is False
    assert not off["started"]
    for res in (on, off):
        np.testing.assert_allclose(np.array(res["dist"]), np.array(res["ref_best"]), rtol=1e-4, atol=1e-3)
    assert on["ids"] == off["ids"] and on["dist"] == off["dist"]
    assert p_on.stderr == p_off.stderr == ""
