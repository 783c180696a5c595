#!/usr/bin/env python3
"""The CUDA driver's own start in new processes, the floor under any GPU program's first result:
dlopen libcuda, cuInit, the primary context of device 0 made current, one 1 MiB allocation.
Needs only the driver (ctypes; no toolkit, no udf).  Prints one JSON line per process and the
medians.

    python bench/cuda_start.py [--processes 5]

--udf: the time from `import udf` to the first search result of a small @udf.metric index
(100k x 64 f32 in 256 lists, one query, k 10, 32 probes; weighted L2 declared monotone, the
default front end), warm (the caches filled by one run first), in new processes with the
driver's early start on and off (UDF_CUDA_EARLY_START), beside the driver's own start above in
the same run (the processes alternate, a different order each round).  Two layouts: the data
made before `import udf` (the package's own path: what it hides behind its own work) and after
the declaration (a script's usual order: data loaded between @udf.metric and Index.build).
Prints a markdown table of medians: first result, driver start (dlopen + cuInit + primary
context, bare process), first result minus driver start.

    python bench/cuda_start.py --udf [--processes 5] [--python-path DIR] [--json FILE]

--python-path: where `import udf` finds the package (default: build/python when it has one,
else the interpreter's own); the on-disk caches live in a fresh folder of the run unless
UDF_CACHE_DIR is set.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

CHILD = r"""
import ctypes, json, time
t0 = time.perf_counter()
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    raise SystemExit(f"no CUDA driver: {e}")
t1 = time.perf_counter()
def check(r, what):
    if r != 0:
        raise SystemExit(f"{what} failed: CUresult {r}")
check(cu.cuInit(0), "cuInit")
t2 = time.perf_counter()
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
t3 = time.perf_counter()
p = ctypes.c_uint64()
check(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 20)), "cuMemAlloc")
check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
t4 = time.perf_counter()
print(json.dumps({"dlopen_ms": (t1 - t0) * 1e3, "cuInit_ms": (t2 - t1) * 1e3, "primary_ctx_ms": (t3 - t2) * 1e3,
                  "first_alloc_ms": (t4 - t3) * 1e3, "total_ms": (t4 - t0) * 1e3}))
"""

# `import udf` to the first search result; UDF_BENCH_DATA says where the data is made ("before"
# import udf, or "after" the declaration).  Times in ms from just before `import udf`.
UDF_CHILD = r"""
import json, os, time
import numpy as np

def make_data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((100_000, 64), dtype=np.float32), rng.standard_normal((1, 64), dtype=np.float32)

after = os.environ["UDF_BENCH_DATA"] == "after"
weights = np.linspace(0.5, 2.0, 64, dtype=np.float32)
if not after:
    data, queries = make_data()
t0 = time.perf_counter()
import udf
t1 = time.perf_counter()

@udf.metric(captures={"weights": weights}, monotone=True)
def weighted_l2(x, y, acc, ctx):
    d = x - y
    return acc + ctx.weights[ctx.dim] * d * d

t2 = time.perf_counter()
if after:
    data, queries = make_data()
t3 = time.perf_counter()
index = udf.Index.build(weighted_l2, data, n_lists=256)
t4 = time.perf_counter()
dist, ids = index.search(queries, k=10, n_probes=32)
assert ids.shape == (1, 10) and (ids >= 0).all()
t5 = time.perf_counter()
ms = lambda t: None if t is None else (t - t0) * 1e3
try:
    from udf._cuda import early_start
    s = early_start()
except ImportError:  # a package without the early start
    s = None
print(json.dumps({"early_start": os.environ.get("UDF_CUDA_EARLY_START"), "data": os.environ["UDF_BENCH_DATA"],
                  "started": s is not None, "import_ms": ms(t1), "declare_ms": (t2 - t1) * 1e3,
                  "data_ms": (t3 - t2) * 1e3, "build_ms": (t4 - t3) * 1e3, "search_ms": (t5 - t4) * 1e3,
                  "first_result_ms": ms(t5),
                  "start_arch_at_ms": ms(s.arch_at) if s else None, "start_done_at_ms": ms(s.ended) if s else None}))
"""

CONFIGS = (("on", "before"), ("off", "before"), ("on", "after"), ("off", "after"))


def run_child(code, env=None):
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(1)
    return json.loads(p.stdout.strip().splitlines()[-1])


def driver_start_ms(r):
    """The driver's start as the early start does it: dlopen, cuInit, the primary context."""
    return r["dlopen_ms"] + r["cuInit_ms"] + r["primary_ctx_ms"]


def udf_env(python_path, cache_dir, early, data):
    env = dict(os.environ, UDF_CUDA_EARLY_START="1" if early == "on" else "0", UDF_BENCH_DATA=data,
               UDF_CACHE_DIR=cache_dir)
    if python_path:
        env["PYTHONPATH"] = os.pathsep.join([python_path, *filter(None, [env.get("PYTHONPATH")])])
    return env


def udf_mode(a):
    python_path = a.python_path
    if python_path is None and os.path.isdir(os.path.join(ROOT, "build", "python", "udf")):
        python_path = os.path.join(ROOT, "build", "python")
    with tempfile.TemporaryDirectory(prefix="udf-cuda-start-") as tmp:
        cache_dir = os.environ.get("UDF_CACHE_DIR") or os.path.join(tmp, "cache")
        for early, data in CONFIGS[:2]:  # fill the caches (front end, udfc, the link of the first bucket)
            run_child(UDF_CHILD, udf_env(python_path, cache_dir, early, data))
        samples = {"driver": [], **{c: [] for c in CONFIGS}}
        kinds = ["driver", *CONFIGS]
        for rep in range(a.processes):
            for kind in kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]:  # each round starts elsewhere
                if kind == "driver":
                    r = run_child(CHILD)
                else:
                    r = run_child(UDF_CHILD, udf_env(python_path, cache_dir, *kind))
                samples[kind].append(r)
                print(json.dumps({"kind": kind if kind == "driver" else "udf", **r}), flush=True)
    print()
    print(udf_table(samples))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"python_path": python_path, "processes": a.processes,
                       "samples": {k if isinstance(k, str) else "%s/%s" % k: v for k, v in samples.items()}}, f,
                      indent=1)
    return 0


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x):
    return "-" if x is None else "%.0f ms" % x


def span(xs):
    return "%.0f-%.0f" % (min(xs), max(xs)) if xs else "-"


def udf_table(samples):
    """The markdown table: one row per (early start, data layout), medians."""
    drv = [driver_start_ms(r) for r in samples["driver"]]
    d = med(drv)
    lines = ["Driver's own start (bare process, dlopen + cuInit + primary context): median %s (%s), "
             "cuInit %s, primary context %s; %d processes each." % (
                 fmt(d), span(drv), fmt(med(r["cuInit_ms"] for r in samples["driver"])),
                 fmt(med(r["primary_ctx_ms"] for r in samples["driver"])), len(drv)),
             "",
             "| early start | data made | first result (min-max) | driver start | first result - driver start "
             "| import udf | @udf.metric | data | Index.build | search | start: arch, done at |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for early, data in CONFIGS:
        rs = samples[(early, data)]
        fr = [r["first_result_ms"] for r in rs]
        f = med(fr)
        start = ("%s, %s" % (fmt(med(r["start_arch_at_ms"] for r in rs)), fmt(med(r["start_done_at_ms"] for r in rs)))
                 if any(r["started"] for r in rs) else "-")
        lines.append("| %s | %s | **%s** (%s) | %s | **%s** | %s | %s | %s | %s | %s | %s |" % (
            early, "before import udf" if data == "before" else "after @udf.metric", fmt(f), span(fr),
            fmt(d), fmt(f - d if f is not None and d is not None else None), fmt(med(r["import_ms"] for r in rs)),
            fmt(med(r["declare_ms"] for r in rs)), fmt(med(r["data_ms"] for r in rs)),
            fmt(med(r["build_ms"] for r in rs)), fmt(med(r["search_ms"] for r in rs)), start))
    lines.append("")
    lines.append("Times from just before `import udf`, medians of new processes, caches warm; \"start: arch, done "
                 "at\": when the early start knew the GPU's arch and had made its context.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=5)
    ap.add_argument("--udf", action="store_true",
                    help="time `import udf` to a first search result with the early start on and off")
    ap.add_argument("--python-path", help="where `import udf` finds the package (default build/python)")
    ap.add_argument("--json", help="--udf: write every sample to this file")
    a = ap.parse_args()
    if a.processes < 1:
        ap.error("--processes must be at least 1")
    if a.udf:
        return udf_mode(a)
    runs = []
    for _ in range(a.processes):
        p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write(p.stdout + p.stderr)
            return 1
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]))
    print("medians: " + ", ".join(f"{k} {statistics.median(r[k] for r in runs):.1f}" for k in runs[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
