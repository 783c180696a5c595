#!/usr/bin/env python3
"""cuVS 26.10 IVF-Flat and this project's IVF-Flat side by side, in one process on one GPU (issue 49).

Four indexes over the same data, searched in turns with the same query batches:
  cuvs_l2    cuVS IVF-Flat, metric "sqeuclidean", on the data X
  udf_l2     udf.Index.build(udf.builtin_metric("sqeuclidean"), X): this project's built-in L2
  cuvs_wl2   cuVS IVF-Flat, "sqeuclidean", on X * sqrt(w) (queries scaled the same way, outside
             the timed region): the weighted L2 sum_d w_d (x_d - q_d)^2 through a built-in metric
  udf_wl2    udf.Index.build(weighted_l2, X): the weighted L2 written in Python (with
             --udf-coarse-weights, coarse_weights=w: clustered and probed in the scaled space)
             (@udf.metric(..., captures={"weights": w}), w a CuPy array, declared monotone unless
             --udf-plain; the coarse probe is plain L2 on X, so its lists differ from cuvs_wl2's)
Weights: w_d uniform in [0.5, 1.5] (NumPy, --seed), the same for both systems.

Data (the `overlap` family of bench/search_bench.cpp, spread 0.92): 1024 centres uniform in
[-1, 1]^dim, each row a centre picked uniformly at random plus N(0, spread^2) per coordinate,
float32.  Queries are independent draws from the same mixture, a fresh batch for every warm-up
and every repetition.  The distribution is search_bench's; the numbers are not: search_bench
draws with std::mt19937_64 per block of 4096 rows, this script with CuPy's RandomState on the
GPU (NumPy's in --selftest), so no row is bit-identical to search_bench's data.

Method (every system the same way): device arrays in and out (CuPy; cuVS writes into
preallocated `neighbors=` / `distances=`, udf returns new CuPy arrays from CuPy's pool), k 10,
n_probes from --probes, batches from --batches.  Each (n_probes, batch) cell: --warmup searches,
then R timed repetitions (--reps; default 100 at batch 1, 50 up to 100, 10 above), the four
systems in turn (the order rotates by repetition), each search after an L2 eviction (a 256 MB
device buffer written, --evict-mb; 0 turns it off) and a device synchronize, timed by
time.perf_counter around the call and a cudaDeviceSynchronize after it.  Reported: the median.
cuVS gets one cuvs.common.Resources for every call (--cuvs-resources per-call: a new one per
call, cuVS's default when resources= is left out) and RMM's default memory resource unless
--cuvs-mr pool|async.

  build          wall time of ivf_flat.build / udf.Index.build from the CuPy array (device
                 synchronized before and after); --build-reps of each (default 3 up to 2M rows,
                 else 1), the last one kept for the searches.  Before any timed build, "prepare"
                 (reported apart): udf compiles and links each metric on a small index (16 lists,
                 4096 rows) and searches it once (udf links on demand, so a first build would
                 otherwise include it); cuVS builds a small index of each data set and does not
                 search it (its first search stays the process's first).  --host-build l2 (the
                 default) also times udf's build of plain L2 from a host NumPy copy of X (all:
                 the UDF too; none); cuVS 26.10's ivf_flat.build refuses host arrays ("device_type
                 mismatch between return mdspan and DLTensor"), so it has no such row.
  first search   the first search of each freshly built index (batch --first-batch, the first
                 --probes); the process's first cuVS search includes cuVS's JIT-LTO of its scan
                 kernels, and is reported apart ("first search in the process").
  recall@10      of each index at each n_probes on --recall-queries fixed queries, against the
                 exact top 10 computed on the GPU in chunks: ||q||^2 - 2 q.x + ||x||^2 by a float32
                 CuPy matmul (TF32 off unless CUPY_TF32=1), on X for L2 and on X * sqrt(w) (and
                 q * sqrt(w)) for the weighted L2.
  vectors scanned  the sizes of a query's n_probes nearest lists, summed, on the same queries
                 (cuVS's list sizes from its centers); "recall@10 at cuVS's vectors scanned, P"
                 puts cuVS's recall at P beside udf's at the same vectors read, interpolated
                 between udf's two --probes around them (so it needs two or more --probes).

Output: progress on stderr, then the machine, the versions and one markdown table (printed last):
per size, rows search batch 1 / 100 / 10k at each n_probes (median ms), recall@10, vectors
scanned, recall at cuVS's vectors scanned, first search
after the build, first search in the process, build (CuPy, NumPy), prepare; columns cuVS L2,
udf built-in L2, their ratio, cuVS on scaled data, the udf UDF, their ratio (ratio = cuVS time /
udf time: above 1, udf is faster).  --json OUT.json keeps every sample, the GPU, the driver, the
libraries' versions and files, the commit (--commit, else $UDF_BENCH_COMMIT, else git); it is
rewritten after each stage, so a run cut short leaves what it measured.  --report OUT.json prints
the table again from such a file, without a GPU; --selftest checks on the CPU (NumPy) the data
generator, the exact top-k, the recall and the report.

    python3 bench/cuvs_compare.py --sizes 1m,10m --json OUT.json         # on the GPU machine
    python3 bench/cuvs_compare.py --rows 1000000 --lists 1024 --probes 32,128
    python3 bench/cuvs_compare.py --report OUT.json                     # anywhere
    python3 bench/cuvs_compare.py --selftest                            # anywhere (NumPy only)

Needs on the GPU machine: cupy, numpy, the `udf` package and the cuVS 26.10 wheels
(bench/README.md, "cuVS side by side", says how they travel to a machine without a registry).
"""
# ---------------------------------------------------------------------------------------------
# Running it on the GPU machine (no package registry there; a call carries at most 64 MiB).
#
# Here, once: the cuVS wheels unpacked, packed with xz and cut into parts of at most 45 MiB under
# .cuvs/ (git-ignored through .git/info/exclude; .cuvs/MANIFEST.txt lists the packages, the
# archive's sha256 and the parts: cuvs-site.tar.xz.part00 .. part04, 202 MiB in all), and the udf
# wheel staged (test/gpu/stage_device.sh puts dist/udf-*-cp312-*.whl in .device/wheel/).  Then one
# device call per part, back to back (a machine stays warm 30 s after a call and keeps /tmp while
# it is warm), each carrying only its part (the tree itself is about 10 MB of the 64 MiB):
#
#   carry [".cuvs/cuvs-site.tar.xz.part00"], command:
#     mkdir -p /tmp/cuvs-parts && cp .cuvs/cuvs-site.tar.xz.part00 /tmp/cuvs-parts/ && ls -l /tmp/cuvs-parts
#   ... the same for part01, part02, part03, part04 ...
#
# and a last call, carrying [".device/wheel", ".cuvs/MANIFEST.txt"], timeout_s 600, that joins and
# checks the parts, unpacks them, installs the udf wheel and runs the bench:
#
#   set -e; cat /tmp/cuvs-parts/cuvs-site.tar.xz.part0[0-4] > /tmp/cuvs.tar.xz
#   test "$(sha256sum < /tmp/cuvs.tar.xz | cut -d' ' -f1)" = "$(awk '/^sha256 /{print $2}' .cuvs/MANIFEST.txt)"
#   rm -rf /tmp/cuvs-site && mkdir -p /tmp/cuvs-site && tar -xJf /tmp/cuvs.tar.xz -C /tmp/cuvs-site
#   python3 -m pip install -q --no-deps --no-index --no-compile --upgrade --target /tmp/udf-site .device/wheel/udf-*-cp312-*.whl
#   V=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
#   export PYTHONPATH=/tmp/cuvs-site:/tmp/udf-site PYTHONUNBUFFERED=1 UDF_CACHE_DIR=/tmp/udf-cache
#   export LD_LIBRARY_PATH=/tmp/cuvs-site/nvidia/cu13/lib:$V/nvidia/cu13/lib:$V/nvidia/nccl/lib
#   set -o pipefail; python3 bench/cuvs_compare.py --sizes 1m,10m --commit COMMIT --json $OUT/cuvs_compare.json 2>&1 | tee $OUT/cuvs_compare.log
#
# (COMMIT: `git rev-parse --short HEAD` here; the device copy has no .git.)  Why the library path:
# `import cuvs` runs libcuvs.load_library(), which loads libkvikio, librmm, libraft and NVRTC
# (through cuda.pathfinder) and then libcuvs.so from the wheel with RTLD_LOCAL, silently giving up
# when the loader cannot find a dependency.  libraft.so / libcuvs.so look for cuBLAS, cuSOLVER,
# cuSPARSE, cuRAND, NCCL and nvJitLink through RPATH $ORIGIN/../../nvidia/{cu13,nccl}/lib, which
# is /tmp/cuvs-site/nvidia/..., where only nvJitLink 13.5 is (the machine's torch environment has
# its own, likely 13.0 for torch cu130; cuVS needs >= 13.3); the rest are the machine's CUDA 13 wheels, in the
# environment's site-packages: hence LD_LIBRARY_PATH.  As a second line of defence the script
# preloads those libraries itself before `import cuvs` (--no-preload turns it off): nvJitLink
# from the first sys.path entry that has it (/tmp/cuvs-site first), then the others, by absolute
# path with RTLD_GLOBAL, so that libcuvs's and cuSPARSE's libnvJitLink.so.13 is the 13.5 one.
# The JSON's "libraries" lists the files the process had mapped at the end.
#
# Budget (estimated from issue 49's numbers, not yet measured with this script): both sizes in one
# process take about 2-4 minutes on an H200 (the 10M builds, three udf builds of about 15 s each,
# dominate), plus about half a minute to unpack; --budget-s (default 540) skips the
# host builds of a size, then whole sizes, when the time left looks too short.  To split: run
# --sizes 1m and --sizes 10m in two calls (the process's first cuVS search, with its JIT-LTO,
# is then in each).
# ---------------------------------------------------------------------------------------------
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "cuvs_compare/1"
SIZES = {"1m": (1_000_000, 1024), "10m": (10_000_000, 4096)}
SYSTEMS = ("cuvs_l2", "udf_l2", "cuvs_wl2", "udf_wl2")
LABELS = {"cuvs_l2": "cuVS L2", "udf_l2": "udf built-in L2", "cuvs_wl2": "cuVS L2, data x sqrt(w)",
          "udf_wl2": "udf weighted-L2 UDF"}
PREPARE_ROWS, PREPARE_LISTS = 4096, 16
# Packages whose versions the JSON records (distribution names).
DISTS = ("cuvs-cu13", "libcuvs-cu13", "pylibraft-cu13", "libraft-cu13", "rmm-cu13", "librmm-cu13", "libkvikio-cu13",
         "rapids-logger", "nvidia-nvjitlink", "udf", "cupy-cuda13x", "numpy", "cuda-bindings", "cuda-pathfinder",
         "nvidia-cublas", "nvidia-cuda-nvrtc")
# Libraries the JSON lists from /proc/self/maps (substrings of the file name).
LIB_KEYS = ("libcuvs", "libraft", "librmm", "libkvikio", "librapids_logger", "libnvJitLink", "libnvrtc", "libcublas",
            "libcusparse", "libcusolver", "libcurand", "libnccl", "libudf_runtime", "libcudart", "libcuda.so")
# Preloaded before `import cuvs` (see the comment block above), in this order.
PRELOAD = (("cu13", "libnvJitLink.so.13"), ("cu13", "libnvrtc.so.13"), ("cu13", "libcublasLt.so.13"),
           ("cu13", "libcublas.so.13"), ("cu13", "libcusparse.so.12"), ("cu13", "libcusolver.so.12"),
           ("cu13", "libcurand.so.10"), ("cu13", "libcufile.so.0"), ("nccl", "libnccl.so.2"))


# ---------------------------------------------------------------- options

def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parse_sizes(text: str, sizes: dict | None = None) -> list[dict]:
    """'1m,10m' (the issue's sizes: 1M rows in 1024 lists, 10M in 4096) or ROWS:LISTS items;
    `sizes`: the named sizes (another bench's table; default SIZES)."""
    sizes = SIZES if sizes is None else sizes
    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        if item.lower() in sizes:
            rows, lists = sizes[item.lower()]
            out.append({"name": item.lower(), "rows": rows, "lists": lists})
            continue
        try:
            rows, lists = (int(v) for v in item.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"a size is {' or '.join(sizes)} or ROWS:LISTS, got {item!r}") from None
        out.append({"name": size_name(rows), "rows": rows, "lists": lists})
    if not out:
        raise argparse.ArgumentTypeError("no size given")
    for s in out:
        if s["rows"] <= 0 or not 1 <= s["lists"] <= s["rows"]:
            raise argparse.ArgumentTypeError(f"size {s['name']}: need rows > 0 and 1 <= lists <= rows")
    return out


def size_name(rows: int) -> str:
    for unit, div in (("m", 1_000_000), ("k", 1000)):
        if rows >= div and rows % div == 0:
            return f"{rows // div}{unit}"
    return str(rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="The module docstring (and bench/README.md) describes the method.")
    g = p.add_argument_group("what to run")
    g.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1m,10m"),
                   help="comma-separated: 1m (1M rows, 1024 lists), 10m (10M rows, 4096 lists) or ROWS:LISTS "
                        "(default 1m,10m)")
    g.add_argument("--rows", type=int, help="one size of this many rows instead of --sizes (with --lists)")
    g.add_argument("--lists", type=int, help="lists of the --rows size (default 1024)")
    g.add_argument("--dim", type=int, default=128, help="vector dimension (default 128)")
    g.add_argument("--clusters", type=int, default=1024, help="mixture centres (default 1024, as search_bench)")
    g.add_argument("--spread", type=float, default=0.92, help="Gaussian spread around each centre (default 0.92, "
                                                               "search_bench's overlap data)")
    g.add_argument("--k", type=int, default=10, help="neighbours per query (default 10)")
    g.add_argument("--probes", type=int_list, default=[32], help="n_probes values (default 32)")
    g.add_argument("--batches", type=int_list, default=[1, 100, 10000], help="batch sizes (default 1,100,10000)")
    g.add_argument("--reps", type=int, default=0, help="timed repetitions per cell (default 0: 100 at batch 1, "
                                                        "50 up to 100, 10 above)")
    g.add_argument("--warmup", type=int, default=4, help="warm-up searches per cell and system (default 4)")
    g.add_argument("--build-reps", type=int, default=0, help="builds of each index (default 0: 3 up to 2M rows, else 1)")
    g.add_argument("--host-build", choices=("none", "l2", "all"), default="l2",
                   help="also time udf's builds from a host NumPy copy (cuVS 26.10's build takes device arrays "
                        "only): l2 = the built-in L2 (default), all = the UDF too, none")
    g.add_argument("--first-batch", type=int, default=1, help="batch of the first search after a build (default 1)")
    g.add_argument("--recall-queries", type=int, default=1000, help="queries of the recall sample (default 1000)")
    g.add_argument("--evict-mb", type=int, default=256, help="L2 eviction buffer written before each search, MB "
                                                              "(default 256; 0: no eviction)")
    g.add_argument("--cuvs-resources", choices=("shared", "per-call"), default="shared",
                   help="one cuvs Resources for every cuVS call (default), or a new one per call")
    g.add_argument("--cuvs-mr", choices=("default", "pool", "async"), default="default",
                   help="RMM memory resource for cuVS: RMM's default (cudaMalloc), a pool, or cudaMallocAsync")
    g.add_argument("--udf-plain", action="store_true", help="declare the weighted-L2 UDF without monotone=True")
    g.add_argument("--udf-coarse-weights", action="store_true",
                   help="build udf's weighted-L2 index with coarse_weights=w (its k-means and coarse probe in the "
                        "space scaled by sqrt(w), where cuVS's index lives); default: the plain L2 coarse metric")
    g.add_argument("--udf-mesoclusters", default="0", help="udf.Index.build's kmeans_mesoclusters: 0 (default: flat "
                   "k-means), a count, or 'sqrt' (round(sqrt(lists)) of each size: two levels, as cuVS)")
    g.add_argument("--seed", type=int, default=49, help="seed of the data, queries and weights (default 49)")
    g.add_argument("--device", type=int, default=0, help="CUDA device (default 0)")
    g.add_argument("--budget-s", type=float, default=540.0,
                   help="skip host builds, then sizes, that would not finish in this many seconds (default 540)")
    g.add_argument("--no-preload", action="store_true", help="do not preload the CUDA libraries before import cuvs")
    o = p.add_argument_group("output")
    o.add_argument("--json", type=Path, help="write every sample and the machine here (rewritten after each stage)")
    o.add_argument("--commit", help="the commit measured (default $UDF_BENCH_COMMIT, else git rev-parse, else unknown)")
    o.add_argument("--report", type=Path, metavar="JSON", help="print the table of a saved JSON and exit (no GPU)")
    o.add_argument("--selftest", action="store_true", help="check the CPU parts with NumPy and exit (no GPU)")
    a = p.parse_args(argv)
    if a.rows is not None:
        lists = a.lists if a.lists is not None else 1024
        if a.rows <= 0 or not 1 <= lists <= a.rows:
            p.error("--rows must be > 0 and --lists in 1 .. rows")
        a.sizes = [{"name": size_name(a.rows), "rows": a.rows, "lists": lists}]
    elif a.lists is not None:
        p.error("--lists goes with --rows")
    for name in ("dim", "clusters", "k", "warmup", "first_batch", "recall_queries"):
        if getattr(a, name) <= 0 and not (name == "warmup" and a.warmup == 0):
            p.error(f"--{name.replace('_', '-')} must be positive")
    if max(a.probes) > min(s["lists"] for s in a.sizes):
        p.error(f"--probes {max(a.probes)} exceeds the lists of a size ({min(s['lists'] for s in a.sizes)})")
    if a.reps < 0 or a.build_reps < 0 or a.evict_mb < 0 or a.spread <= 0:
        p.error("--reps, --build-reps and --evict-mb must be >= 0, --spread > 0")
    return a


def reps_for(batch: int, override: int) -> int:
    if override:
        return override
    return 100 if batch == 1 else 50 if batch <= 100 else 10


def build_reps_for(rows: int, override: int) -> int:
    return override or (3 if rows <= 2_000_000 else 1)


# ---------------------------------------------------------------- data (NumPy or CuPy)

def _rng(xp, seed: int):
    return xp.random.RandomState(seed)


def _uniform(xp, rng, shape, low: float, high: float):
    if xp.__name__ == "numpy":
        return (low + (high - low) * rng.random_sample(shape)).astype(np.float32)
    return low + (high - low) * rng.random_sample(shape, dtype=np.float32)


def _normal(xp, rng, shape):
    if xp.__name__ == "numpy":
        return rng.standard_normal(shape).astype(np.float32)
    return rng.standard_normal(shape, dtype=np.float32)


def make_centres(xp, clusters: int, dim: int, seed: int):
    """search_bench's mixture centres: `clusters` points uniform in [-1, 1]^dim (float32)."""
    return _uniform(xp, _rng(xp, seed), (clusters, dim), -1.0, 1.0)


def draw(xp, centres, n: int, spread: float, seed: int, chunk: int = 1 << 20):
    """n rows of the mixture: a centre picked uniformly plus N(0, spread^2) per coordinate (float32),
    generated `chunk` rows at a time (bounded temporaries at 10M rows)."""
    rng = _rng(xp, seed)
    dim = centres.shape[1]
    out = xp.empty((n, dim), dtype=np.float32)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        pick = rng.randint(0, centres.shape[0], size=e - s)
        block = _normal(xp, rng, (e - s, dim))
        block *= np.float32(spread)
        block += centres[pick]
        out[s:e] = block
    return out


def make_weights(dim: int, seed: int) -> np.ndarray:
    """The weighted L2's weights: uniform in [0.5, 1.5], float32 (host)."""
    return np.random.default_rng([seed, 7]).uniform(0.5, 1.5, dim).astype(np.float32)


def _smallest_k(xp, d, k: int):
    """(values, column indices) of the k smallest entries of each row of d, ascending; d is
    overwritten.  k rounds of argmin: exact, and with CuPy only reductions (no full sort)."""
    nq = d.shape[0]
    rows = xp.arange(nq)
    vals = xp.empty((nq, k), dtype=d.dtype)
    idx = xp.empty((nq, k), dtype=np.int64)
    for j in range(k):
        a = d.argmin(axis=1)
        idx[:, j] = a
        vals[:, j] = d[rows, a]
        d[rows, a] = np.inf
    return vals, idx


def exact_topk(xp, data, queries, k: int, max_elems: int = 1 << 28):
    """Exact k nearest rows of `data` under squared L2 for each query, (ids int64, distances),
    nearest first: ||q||^2 - 2 q.x + ||x||^2 in float32, a block of rows at a time (each block's
    distance matrix at most max_elems values: 1 GiB by default), merged block by block."""
    nq, n = queries.shape[0], data.shape[0]
    k = min(k, n)
    q = queries.astype(np.float32, copy=False)
    qn = (q * q).sum(axis=1)[:, None]
    step = max(k, max_elems // max(nq, 1))
    rows = xp.arange(nq)[:, None]
    best_d = best_i = None
    for s in range(0, n, step):
        x = data[s:s + step]
        d = q @ x.T
        d *= np.float32(-2.0)
        d += (x * x).sum(axis=1)[None, :]
        d += qn
        vals, idx = _smallest_k(xp, d, min(k, x.shape[0]))
        del d
        idx += s
        if best_d is None:
            best_d, best_i = vals, idx
        else:
            cd = xp.concatenate([best_d, vals], axis=1)
            ci = xp.concatenate([best_i, idx], axis=1)
            order = xp.argsort(cd, axis=1)[:, :k]
            best_d, best_i = cd[rows, order], ci[rows, order]
    order = xp.argsort(best_d, axis=1)
    return best_i[rows, order], best_d[rows, order]


def nearest_list_sizes(xp, data, centers, chunk: int = 1 << 16):
    """The rows of data nearest each center (squared L2, in chunks of rows): an IVF-Flat index's list
    sizes when its build puts every row in the list of its nearest center, as cuVS's does."""
    c = xp.asarray(centers, dtype=xp.float32)
    cn = (c * c).sum(axis=1)
    sizes = xp.zeros(c.shape[0], dtype=xp.int64)
    for i in range(0, data.shape[0], chunk):
        x = xp.asarray(data[i:i + chunk], dtype=xp.float32)
        sizes += xp.bincount(xp.argmin(cn[None, :] - 2.0 * (x @ c.T), axis=1), minlength=c.shape[0])
    return sizes


def scanned_per_query(xp, centers, sizes, queries, p: int) -> float:
    """The vectors a query scans at n_probes p, over the queries: the sizes of its p nearest lists
    (squared L2 to the centers), summed, then averaged."""
    c = xp.asarray(centers, dtype=xp.float32)
    q = xp.asarray(queries, dtype=xp.float32)
    d = (c * c).sum(axis=1)[None, :] - 2.0 * (q @ c.T)
    near = xp.argpartition(d, p - 1, axis=1)[:, :p]
    return float(xp.asarray(sizes)[near].sum(axis=1).mean())


def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    """|found ∩ truth| / (n k), row by row (host arrays); padding ids (-1) never count."""
    found, truth = np.asarray(found), np.asarray(truth)
    hits = sum(len(set(f[f >= 0].tolist()) & set(t.tolist())) for f, t in zip(found, truth))
    return hits / truth.size


# ---------------------------------------------------------------- report

def median(samples) -> float | None:
    return float(statistics.median(samples)) if samples else None


def fmt_ms(v: float | None) -> str:
    if v is None:
        return "-"
    return (f"{v:.3f} ms" if v < 1 else f"{v:.2f} ms" if v < 10 else f"{v:.1f} ms" if v < 1000
            else f"{v / 1000:.2f} s")


def fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} s"


def fmt_ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "-"
    r = a / b
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x" if r < 100 else f"{r:.0f}x"


def fmt_qps(batch: int, ms: float | None) -> str:
    if ms is None or ms <= 0:
        return ""
    q = batch / (ms / 1000.0)
    return f", {q / 1e6:.2f}M QPS" if q >= 1e6 else f", {q / 1e3:.0f}k QPS"


def md_table(header: list[str], rows: list[list[str]], right_from: int) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, align, *rows])


def _batch_name(b: int) -> str:
    return f"{b // 1000}k" if b >= 1000 and b % 1000 == 0 else str(b)


def recall_at_vectors(points: list[tuple[float, float]], vectors: float) -> float | None:
    """A system's recall at `vectors` scanned a query, linear between its two measured n_probes
    around it; `points` are its (vectors scanned, recall) pairs.  None outside their range."""
    pts = sorted(points)
    if len(pts) < 2 or not pts[0][0] <= vectors <= pts[-1][0]:
        return None
    return float(np.interp(vectors, [v for v, _ in pts], [r for _, r in pts]))


def equal_work_rows(size: dict) -> list[list[str]]:
    """Rows "recall@k at cuVS's vectors, P{p}": cuVS's recall at P{p} beside udf's at the same
    vectors scanned a query (interpolated between udf's n_probes), for each P where both systems
    have recall and vectors scanned and udf's n_probes span cuVS's vectors."""
    rec = {(r["system"], r["probes"]): r["recall"] for r in size.get("recall", [])}
    scan = {(x["system"], x["probes"]): x["per_query"] for x in size.get("scanned", [])}
    rows = []
    for p in sorted({p for _, p in rec}):
        cells = []
        for ours, theirs in (("udf_l2", "cuvs_l2"), ("udf_wl2", "cuvs_wl2")):
            pts = [(scan[(ours, q)], rec[(ours, q)]) for (s, q) in rec if s == ours and (ours, q) in scan]
            at = recall_at_vectors(pts, scan[(theirs, p)]) if (theirs, p) in scan and (theirs, p) in rec else None
            cells += [f"{rec[(theirs, p)]:.4f}", f"{at:.4f}", ""] if at is not None else ["-", "-", ""]
        if any(c not in ("-", "") for c in cells):
            rows.append([size["name"], f"recall@{size.get('k', 10)} at cuVS's vectors scanned, P{p}"] + cells)
    return rows


def table_rows(size: dict) -> list[list[str]]:
    """The markdown rows of one size: [size, measure, cuvs_l2, udf_l2, ratio, cuvs_wl2, udf_wl2, ratio]."""
    name = size["name"]
    out: list[list[str]] = []

    def row(measure: str, vals: dict, fmt, extra=lambda s: "", ratio=True):
        cells = [fmt(vals.get(s)) + (extra(s) if vals.get(s) is not None else "") for s in SYSTEMS]
        r1 = fmt_ratio(vals.get("cuvs_l2"), vals.get("udf_l2")) if ratio else ""
        r2 = fmt_ratio(vals.get("cuvs_wl2"), vals.get("udf_wl2")) if ratio else ""
        out.append([name, measure, cells[0], cells[1], r1, cells[2], cells[3], r2])

    searches = size.get("searches", [])
    probes = sorted({c["probes"] for c in searches})
    batches = sorted({c["batch"] for c in searches})
    for p in probes:
        for b in batches:
            vals = {c["system"]: median(c["samples_ms"]) for c in searches if c["probes"] == p and c["batch"] == b}
            if vals:
                row(f"search, batch {_batch_name(b)}, P{p}", vals, fmt_ms,
                    (lambda s, b=b, v=vals: fmt_qps(b, v[s])) if b >= 1000 else (lambda s: ""))
        rec = {r["system"]: r["recall"] for r in size.get("recall", []) if r["probes"] == p}
        if rec:
            cells = [f"{rec[s]:.4f}" if s in rec else "-" for s in SYSTEMS]
            out.append([name, f"recall@{size.get('k', 10)}, P{p}", cells[0], cells[1], "", cells[2], cells[3], ""])
        scan = {x["system"]: x["per_query"] for x in size.get("scanned", []) if x["probes"] == p}
        if scan:
            row(f"vectors scanned a query, P{p}", scan, lambda v: "-" if v is None else f"{v:,.0f}")
    out += equal_work_rows(size)
    builds = size.get("builds", [])
    dev = {b["system"]: b for b in builds if b["source"] == "cupy"}
    if dev:
        first = {s: median(b["first_search_ms"]) for s, b in dev.items() if b.get("first_search_ms")}
        fb = next(iter(dev.values())).get("first_search_batch", 1)
        fp = next(iter(dev.values())).get("first_search_probes", "")
        row(f"first search after the build (batch {fb}, P{fp})", first, fmt_ms)
        proc = {s: b["process_first_ms"] for s, b in dev.items() if b.get("process_first_ms") is not None}
        if proc:
            row("first search in the process (cuVS: JIT-LTO)", proc, fmt_ms)
        row("build from CuPy", {s: median(b["samples_s"]) for s, b in dev.items()}, fmt_s)
    host = {b["system"]: median(b["samples_s"]) for b in builds if b["source"] == "numpy"}
    if host:
        row("build from NumPy (host)", host, fmt_s)
    prep = size.get("prepare_s") or {}
    if prep:
        row("prepare: small index (udf: + compile, link, first search)", prep, fmt_s, ratio=False)
    return out


def render(doc: dict) -> str:
    m, v, c = doc.get("machine", {}), doc.get("versions", {}), doc.get("config", {})
    drv = m.get("driver_release") or m.get("driver_api") or "?"
    lines = [f"# cuVS IVF-Flat vs udf IVF-Flat ({doc.get('created', '?')})", "",
             f"GPU: {m.get('gpu', '?')}, driver {drv}, CUDA driver API {m.get('driver_api', '?')}; "
             f"commit {doc.get('commit', '?')}.",
             f"Versions: cuvs {v.get('cuvs', '?')}, udf {v.get('udf', '?')}, cupy {v.get('cupy', '?')}, "
             f"numpy {v.get('numpy', '?')}, nvJitLink {v.get('nvidia-nvjitlink', '?')}, Python {v.get('python', '?')}.",
             f"Data: Gaussian mixture, {c.get('clusters', '?')} centres in [-1,1]^{c.get('dim', '?')}, spread "
             f"{c.get('spread', '?')}, f32; k {c.get('k', '?')}; device arrays in and out; median of "
             f"{c.get('reps', 0) or '100 / 50 / 10 (batch 1 / <= 100 / larger)'} repetitions per cell after "
             f"{c.get('warmup', '?')} warm-ups, a fresh query "
             f"batch each, L2 evicted ({c.get('evict_mb', '?')} MB) before each; cuVS resources "
             f"{c.get('cuvs_resources', '?')}, RMM {c.get('cuvs_mr', '?')}; the UDF "
             f"{'declared monotone' if c.get('udf_monotone') else 'not declared monotone'}.",
             "Ratio = cuVS time / udf time (above 1: udf faster). cuVS on data x sqrt(w) searches the same weighted "
             "L2 as the UDF. Recall against the exact top-k of each metric (GPU matmul).", ""]
    rows = [r for s in doc.get("sizes", []) for r in table_rows(s)]
    for s in doc.get("sizes", []):
        notes = "; ".join(s.get("notes", []))
        lines.append(f"- {s['name']}: {s['rows']:,} x {c.get('dim', '?')}, {s['lists']} lists; data "
                     f"{fmt_s(s.get('gen_s'))}, ground truth {fmt_s(s.get('truth_s'))}"
                     f"{'; ' + notes if notes else ''}.")
    if doc.get("incomplete"):
        lines.append(f"- incomplete run: {doc['incomplete']}")
    lines += ["", md_table(["size", "measure", LABELS["cuvs_l2"], LABELS["udf_l2"], "ratio", LABELS["cuvs_wl2"],
                             LABELS["udf_wl2"], "ratio"], rows, 2)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the GPU run

def source_commit(given: str | None) -> str:
    if given:
        return given
    if os.environ.get("UDF_BENCH_COMMIT"):
        return os.environ["UDF_BENCH_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True)
        return head.stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def nvidia_smi() -> dict:
    if not shutil.which("nvidia-smi"):
        return {}
    r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True,
                       text=True)
    if r.returncode != 0 or not r.stdout.strip():
        return {}
    name, _, release = r.stdout.splitlines()[0].rpartition(",")
    return {"smi_name": name.strip(), "driver_release": release.strip()}


def versions() -> dict:
    from importlib import metadata
    out = {"python": platform.python_version()}
    for d in DISTS:
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            pass
    return out


def mapped_libraries() -> list[str]:
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    except OSError:
        return []
    return sorted(p for p in paths if any(k in os.path.basename(p) for k in LIB_KEYS))


def preload_cuda_libs() -> list[str]:
    """Loads, by absolute path and RTLD_GLOBAL, the CUDA libraries libraft / libcuvs need, each from
    the first sys.path entry whose nvidia/{cu13,nccl}/lib has it (PYTHONPATH before site-packages),
    nvJitLink first.  Returns the files loaded; a library found nowhere is left to the loader."""
    import glob
    loaded = []
    for sub, soname in PRELOAD:
        found = None
        for entry in sys.path:
            base = os.path.join(entry or ".", "nvidia")
            # CUDA 13 wheels: nvidia/cu13/lib (NCCL: nvidia/nccl/lib); older layouts: nvidia/<name>/lib.
            for path in [os.path.join(base, sub, "lib", soname), *sorted(glob.glob(os.path.join(base, "*", "lib", soname)))]:
                if os.path.isfile(path):
                    found = path
                    break
            if found:
                break
        if found:
            try:
                ctypes.CDLL(found, mode=ctypes.RTLD_GLOBAL)
                loaded.append(found)
            except OSError as exc:
                print(f"cuvs_compare: preloading {found} failed: {exc}", file=sys.stderr)
    return loaded


class Run:
    """Everything the GPU part shares: the clock, the log, the document and its file
    (rewritten after each size with --json); filter_capture_bench.py uses it too."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.t0 = time.perf_counter()
        self.doc: dict = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def log(self, msg: str) -> None:
        print(f"[{self.elapsed():7.1f} s] {msg}", file=sys.stderr, flush=True)

    def save(self) -> None:
        if not self.args.json:
            return
        path = self.args.json
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.doc, indent=1) + "\n")
        os.replace(tmp, path)


def run(args: argparse.Namespace) -> dict:
    r = Run(args)
    preloaded = [] if args.no_preload else preload_cuda_libs()
    # cuVS first: its libnvJitLink.so.13 (>= 13.3) must be the first one loaded under that name.
    try:
        import cuvs
        from cuvs.common import Resources
        from cuvs.neighbors import ivf_flat
    except (ImportError, OSError) as exc:
        sys.exit(f"cuvs_compare: cannot import cuVS ({exc}).\nPut the unpacked cuvs-cu13 wheels on PYTHONPATH and "
                 "their CUDA libraries' folders on LD_LIBRARY_PATH (bench/README.md, 'cuVS side by side').")
    import cupy as cp
    import udf

    a = args
    cp.cuda.Device(a.device).use()
    props = cp.cuda.runtime.getDeviceProperties(a.device)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    vers = versions()
    vers.update(cuvs=cuvs.__version__, udf=udf.__version__, cupy=cp.__version__, numpy=np.__version__)
    config = {k: (v if not isinstance(v, Path) else str(v)) for k, v in vars(a).items()
              if k not in ("json", "report", "selftest", "sizes")}
    config.update(sizes=a.sizes, udf_monotone=not a.udf_plain, prepare_rows=PREPARE_ROWS,
                  prepare_lists=PREPARE_LISTS, cupy_tf32=os.environ.get("CUPY_TF32", "0"))
    r.doc = {"schema": SCHEMA, "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "commit": source_commit(a.commit),
             "command": " ".join(sys.argv),
             "machine": {"gpu": name, "device": a.device, "total_memory": int(props["totalGlobalMem"]),
                         "sm_count": int(props["multiProcessorCount"]),
                         "driver_api": cp.cuda.runtime.driverGetVersion(),
                         "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "host": platform.node(),
                         **nvidia_smi()},
             "versions": vers, "config": config, "preloaded": preloaded,
             "env": {k: v for k, v in os.environ.items()
                     if k in ("PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_CACHE_DISABLE", "CUPY_TF32")
                     or k.startswith("UDF_") or k.startswith("RAPIDS_")},
             "sizes": []}
    try:
        r.doc["machine"]["udf_device_info"] = {k: (v if isinstance(v, (int, float, str)) else str(v))
                                               for k, v in udf.device_info(a.device).items()}
    except Exception as exc:  # noqa: BLE001 (informational)
        r.doc["machine"]["udf_device_info"] = f"unavailable: {exc}"
    r.log(f"{name}; cuvs {cuvs.__version__}, udf {udf.__version__}, cupy {cp.__version__}; "
          f"preloaded {len(preloaded)} libraries")

    if a.cuvs_mr != "default":
        import rmm
        mr = (rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource()) if a.cuvs_mr == "pool"
              else rmm.mr.CudaAsyncMemoryResource())
        rmm.mr.set_current_device_resource(mr)
        r.doc["config"]["cuvs_mr_object"] = type(mr).__name__

    weights_host = make_weights(a.dim, a.seed)
    weights = cp.asarray(weights_host)
    sqrt_w = cp.sqrt(weights)
    r.doc["weights"] = [float(x) for x in weights_host]
    builtin = udf.builtin_metric("sqeuclidean")

    @udf.metric(order="min", initial=0.0, coarse_metric="l2", monotone=not a.udf_plain, captures={"weights": weights})
    def weighted_l2(x, y, acc, ctx):
        d = x - y
        return acc + ctx.weights[ctx.dim] * d * d

    r.doc["udf_metric"] = {"backend": getattr(weighted_l2, "backend", None),
                           "nvrtc_unsupported": getattr(weighted_l2, "nvrtc_unsupported", None)}
    res = Resources() if a.cuvs_resources == "shared" else None
    sync = cp.cuda.Device(a.device).synchronize
    evict = cp.zeros(a.evict_mb << 20, dtype=cp.uint8) if a.evict_mb else None
    state = {"cuvs_first": None, "evictions": 0}

    def evict_l2():
        if evict is not None:
            state["evictions"] += 1
            evict.fill(state["evictions"] & 0xFF)

    def cuvs_kw() -> dict:
        return {"resources": res} if res is not None else {}

    search_params = {p: ivf_flat.SearchParams(n_probes=p) for p in a.probes}
    outs: dict[int, tuple] = {}

    def cuvs_search(index, q, p):
        n = q.shape[0]
        if n not in outs:
            outs[n] = (cp.empty((n, a.k), dtype=cp.int64), cp.empty((n, a.k), dtype=cp.float32))
        nb, dist = outs[n]
        ivf_flat.search(search_params[p], index, q, a.k, neighbors=nb, distances=dist, **cuvs_kw())
        return nb

    def udf_search(index, q, p):
        _, ids = index.search(q, k=a.k, n_probes=p)
        return ids

    def timed(fn, *fargs) -> tuple[float, object]:
        sync()
        t = time.perf_counter()
        out = fn(*fargs)
        sync()
        return (time.perf_counter() - t) * 1000.0, out

    for si, size in enumerate(a.sizes):
        left = a.budget_s - r.elapsed()
        if si > 0 and left < estimate_size_s(size, a):
            note = f"size {size['name']} skipped: {left:.0f} s of --budget-s left, about {estimate_size_s(size, a):.0f} needed"
            r.log(note)
            r.doc["incomplete"] = note
            r.save()
            continue
        out = {"name": size["name"], "rows": size["rows"], "lists": size["lists"], "k": a.k, "notes": [],
               "builds": [], "searches": [], "recall": []}
        r.doc["sizes"].append(out)
        run_size(r, size, out, cp=cp, ivf_flat=ivf_flat, udf=udf, builtin=builtin, wl2=weighted_l2, sqrt_w=sqrt_w,
                 res=res, cuvs_kw=cuvs_kw, cuvs_search=cuvs_search, udf_search=udf_search, timed=timed, sync=sync,
                 evict_l2=evict_l2, state=state)
        outs.clear()
        gc.collect()
        cp.get_default_memory_pool().free_all_blocks()
        r.doc["libraries"] = mapped_libraries()
        r.save()
    r.doc["libraries"] = mapped_libraries()
    r.doc["wall_s"] = r.elapsed()
    r.save()
    return r.doc


def estimate_size_s(size: dict, a: argparse.Namespace) -> float:
    """A rough upper estimate of one size's seconds on an H200 (for --budget-s): udf builds about
    1.6 s per million rows each, cuVS 0.3, the rest small."""
    mrows = size["rows"] / 1e6
    n_builds = build_reps_for(size["rows"], a.build_reps)
    host = {"none": 0, "l2": 1, "all": 2}[a.host_build]
    return 20 + mrows * (n_builds * (2 * 1.6 + 2 * 0.3) + host * 1.6 + 1.0)


def udf_mesoclusters(value: str, lists: int) -> int:
    """--udf-mesoclusters for a size of `lists` lists: 'sqrt' is round(sqrt(lists))."""
    return round(math.sqrt(lists)) if value == "sqrt" else int(value)


def run_size(r: Run, size: dict, out: dict, *, cp, ivf_flat, udf, builtin, wl2, sqrt_w, res, cuvs_kw, cuvs_search,
             udf_search, timed, sync, evict_l2, state) -> None:
    a = r.args
    rows, lists, tag = size["rows"], size["lists"], size["name"]
    wkw = {"coarse_weights": make_weights(a.dim, a.seed)} if a.udf_coarse_weights else {}
    meso = udf_mesoclusters(a.udf_mesoclusters, lists)
    out["udf_mesoclusters"] = meso
    seed = a.seed * 1000 + rows % 997  # each size its own draws
    r.log(f"{tag}: generating {rows:,} x {a.dim} (spread {a.spread})")
    sync()
    t = time.perf_counter()
    centres = make_centres(cp, a.clusters, a.dim, a.seed)  # the same centres for every size
    X = draw(cp, centres, rows, a.spread, seed + 1)
    Xs = X * sqrt_w
    sync()
    out["gen_s"] = time.perf_counter() - t
    n_eval = min(a.recall_queries, 1_000_000)
    eval_q = draw(cp, centres, n_eval, a.spread, seed + 2)
    eval_qs = eval_q * sqrt_w
    pools = {}
    for bi, b in enumerate(a.batches):
        n = a.warmup + reps_for(b, a.reps)
        q = draw(cp, centres, n * b, a.spread, seed + 10 + bi).reshape(n, b, a.dim)
        pools[b] = (q, q * sqrt_w)
    n_builds = build_reps_for(rows, a.build_reps)
    first_q = draw(cp, centres, 4 * n_builds * a.first_batch, a.spread, seed + 3).reshape(4 * n_builds, a.first_batch,
                                                                                       a.dim)
    first_qs = first_q * sqrt_w
    sync()
    r.save()

    r.log(f"{tag}: exact top-{a.k} of {n_eval} queries (L2 and weighted L2)")
    t = time.perf_counter()
    truth = {"l2": cp.asnumpy(exact_topk(cp, X, eval_q, a.k)[0]), "wl2": cp.asnumpy(exact_topk(cp, Xs, eval_qs, a.k)[0])}
    sync()
    cp.get_default_memory_pool().free_all_blocks()
    out["truth_s"] = time.perf_counter() - t

    # Before any timed build: udf compiles + links each metric (on demand, k <= 32 first) on a small
    # index and searches it; cuVS builds a small index (its first search stays for later).
    prep = {}
    small = min(PREPARE_ROWS, rows)
    for system, data in (("cuvs_l2", X), ("cuvs_wl2", Xs)):
        dt, _ = timed(lambda d=data: ivf_flat.build(ivf_flat.IndexParams(n_lists=min(PREPARE_LISTS, small),
                                                                         metric="sqeuclidean"), d[:small], **cuvs_kw()))
        prep[system] = dt / 1000.0
    for system, metric in (("udf_l2", builtin), ("udf_wl2", wl2)):
        dt, _ = timed(lambda m=metric: udf.Index.build(m, X[:small], n_lists=min(PREPARE_LISTS, small))
                      .search(eval_q[:1], k=a.k, n_probes=1))
        prep[system] = dt / 1000.0
    gc.collect()
    out["prepare_s"] = prep
    r.log(f"{tag}: prepare " + ", ".join(f"{s} {v:.2f} s" for s, v in prep.items()))
    r.save()

    # Builds from CuPy; the last index of each system is kept for the searches.
    builders = {
        "cuvs_l2": (lambda: ivf_flat.build(ivf_flat.IndexParams(n_lists=lists, metric="sqeuclidean"), X, **cuvs_kw()),
                    cuvs_search, first_q),
        "udf_l2": (lambda: udf.Index.build(builtin, X, n_lists=lists, kmeans_mesoclusters=meso), udf_search, first_q),
        "cuvs_wl2": (lambda: ivf_flat.build(ivf_flat.IndexParams(n_lists=lists, metric="sqeuclidean"), Xs,
                                            **cuvs_kw()), cuvs_search, first_qs),
        "udf_wl2": (lambda: udf.Index.build(wl2, X, n_lists=lists, kmeans_mesoclusters=meso, **wkw), udf_search, first_q),
    }
    indexes = {}
    p0 = a.probes[0]
    fq = 0
    for system, (build, search, fqueries) in builders.items():
        rec = {"system": system, "source": "cupy", "samples_s": [], "first_search_ms": [],
               "first_search_batch": a.first_batch, "first_search_probes": p0}
        for rep in range(n_builds):
            indexes.pop(system, None)
            gc.collect()
            dt, idx = timed(build)
            rec["samples_s"].append(dt / 1000.0)
            evict_l2()
            ms, _ = timed(search, idx, fqueries[fq % len(fqueries)], p0)
            fq += 1
            if system.startswith("cuvs") and state["cuvs_first"] is None:
                state["cuvs_first"] = ms
                rec["process_first_ms"] = ms
            else:
                rec["first_search_ms"].append(ms)
            indexes[system] = idx
        out["builds"].append(rec)
        r.log(f"{tag}: {system} build {', '.join(f'{s:.2f}' for s in rec['samples_s'])} s; first search "
              + ", ".join(f"{v:.2f}" for v in rec["first_search_ms"])
              + (f" ms (process's first: {rec['process_first_ms']:.1f} ms)" if "process_first_ms" in rec else " ms"))
        r.save()

    # Each index's centers and list sizes in the space its coarse probe compares (cuVS's sizes: each
    # row in the list of its nearest center, as its build puts it; udf's: the index's own).
    lists_of = {}
    for s in SYSTEMS:
        if s.startswith("cuvs"):
            cen = cp.asarray(indexes[s].centers)
            lists_of[s] = (cen, nearest_list_sizes(cp, Xs if s == "cuvs_wl2" else X, cen))
        else:
            lists_of[s] = (cp.asarray(indexes[s].centroids()), cp.asarray(indexes[s].list_sizes(), dtype=cp.int64))
    sync()
    out["scanned"] = []

    # Searches: each cell's warm-ups and repetitions, the systems in turn.
    for p in a.probes:
        for b in a.batches:
            q, qs = pools[b]
            n_reps = reps_for(b, a.reps)
            cells = {s: {"system": s, "probes": p, "batch": b, "k": a.k, "warmup_ms": [], "samples_ms": []}
                     for s in SYSTEMS}
            for i in range(a.warmup + n_reps):
                order = SYSTEMS[i % len(SYSTEMS):] + SYSTEMS[:i % len(SYSTEMS)]
                for s in order:
                    search = cuvs_search if s.startswith("cuvs") else udf_search
                    batch = qs[i] if s == "cuvs_wl2" else q[i]
                    evict_l2()
                    ms, _ = timed(search, indexes[s], batch, p)
                    cells[s]["warmup_ms" if i < a.warmup else "samples_ms"].append(ms)
            out["searches"].extend(cells.values())
            r.log(f"{tag}: P{p} batch {b}: " + ", ".join(f"{s} {median(c['samples_ms']):.3f} ms"
                                                          for s, c in cells.items()))
        for s in SYSTEMS:
            search = cuvs_search if s.startswith("cuvs") else udf_search
            ids = search(indexes[s], eval_qs if s == "cuvs_wl2" else eval_q, p)
            sync()
            found = cp.asnumpy(ids)
            out["recall"].append({"system": s, "probes": p, "queries": n_eval,
                                  "recall": recall_at_k(found, truth["wl2" if s.endswith("wl2") else "l2"])})
        r.log(f"{tag}: recall@{a.k} P{p}: " + ", ".join(f"{x['system']} {x['recall']:.4f}" for x in out["recall"]
                                                        if x["probes"] == p))
        for s in SYSTEMS:
            cen, sizes = lists_of[s]
            out["scanned"].append({"system": s, "probes": p, "queries": n_eval, "per_query":
                                   scanned_per_query(cp, cen, sizes, eval_qs if s == "cuvs_wl2" or (s == "udf_wl2" and wkw)
                                                     else eval_q, p)})
        r.log(f"{tag}: vectors scanned a query P{p}: " + ", ".join(f"{x['system']} {x['per_query']:,.0f}"
                                                                   for x in out["scanned"] if x["probes"] == p))
        r.save()
    indexes.clear()
    lists_of.clear()
    pools.clear()
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()

    # Builds from a host copy (after the searches: a run cut short keeps those).
    host = {"none": [], "l2": ["udf_l2"], "all": ["udf_l2", "udf_wl2"]}[a.host_build]
    if host:
        need = len(host) * (rows / 1e6) * 1.6 * n_builds + 5
        if r.elapsed() + need > a.budget_s:
            note = f"host builds skipped ({a.budget_s - r.elapsed():.0f} s of --budget-s left, about {need:.0f} needed)"
            out["notes"].append(note)
            r.log(f"{tag}: {note}")
        else:
            t = time.perf_counter()
            X_host = cp.asnumpy(X)
            out["host_copy_s"] = time.perf_counter() - t
            host_builders = {
                "udf_l2": lambda: udf.Index.build(builtin, X_host, n_lists=lists, kmeans_mesoclusters=meso),
                "udf_wl2": lambda: udf.Index.build(wl2, X_host, n_lists=lists, kmeans_mesoclusters=meso, **wkw),
            }
            for system in host:
                rec = {"system": system, "source": "numpy", "samples_s": []}
                for _ in range(n_builds):
                    dt, idx = timed(host_builders[system])
                    rec["samples_s"].append(dt / 1000.0)
                    del idx
                    gc.collect()
                out["builds"].append(rec)
                r.log(f"{tag}: {system} build from NumPy {', '.join(f'{s:.2f}' for s in rec['samples_s'])} s")
                r.save()
            del X_host


# ---------------------------------------------------------------- self-test (CPU)

def selftest() -> None:
    """The parts that need no GPU, with NumPy: options, data, exact top-k, recall, report."""
    a = parse_args(["--sizes", "1m,10m,20000:256", "--probes", "32,128"])
    assert [s["rows"] for s in a.sizes] == [1_000_000, 10_000_000, 20_000] and a.sizes[2]["name"] == "20k"
    assert parse_args(["--rows", "1000000", "--lists", "1024"]).sizes == [{"name": "1m", "rows": 1_000_000,
                                                                          "lists": 1024}]
    assert reps_for(1, 0) == 100 and reps_for(100, 0) == 50 and reps_for(10000, 0) == 10 and reps_for(5, 7) == 7
    assert build_reps_for(1_000_000, 0) == 3 and build_reps_for(10_000_000, 0) == 1
    # The mixture: centres in [-1, 1], rows around them with the spread, one row per pick.
    centres = make_centres(np, 1024, 128, 49)
    assert centres.dtype == np.float32 and centres.shape == (1024, 128)
    assert -1.0 <= centres.min() < -0.99 and 0.99 < centres.max() <= 1.0
    x = draw(np, centres, 20000, 0.92, 50, chunk=7000)
    assert x.dtype == np.float32 and x.shape == (20000, 128)
    # Each row's nearest centre explains it: residual std ~ spread (0.92), mean ~ 0.
    d2 = (x * x).sum(1)[:, None] - 2 * x @ centres.T + (centres * centres).sum(1)[None, :]
    resid = x - centres[d2.argmin(1)]
    assert abs(float(resid.std()) - 0.92) < 0.05, resid.std()
    assert abs(float(x.mean())) < 0.02 and abs(float(x.std()) - (0.92 ** 2 + 1 / 3) ** 0.5) < 0.02, x.std()
    assert np.array_equal(draw(np, centres, 100, 0.92, 50, chunk=33), draw(np, centres, 100, 0.92, 50, chunk=33))
    w = make_weights(128, 49)
    assert w.dtype == np.float32 and 0.5 <= w.min() and w.max() <= 1.5 and w.std() > 0.2
    # Exact top-k against a full sort, in several blocks, for L2 and the weighted L2 by scaling.
    q = draw(np, centres, 37, 0.92, 51)
    for scale in (None, np.sqrt(w)):
        xd, qd = (x, q) if scale is None else (x * scale, q * scale)
        ids, dist = exact_topk(np, xd, qd, 10, max_elems=37 * 3000)
        full = ((qd[:, None, :].astype(np.float64) - xd[None, :, :]) ** 2).sum(-1)
        ref = np.argsort(full, axis=1)[:, :10]
        assert ids.shape == (37, 10) and ids.dtype == np.int64
        assert recall_at_k(ids, ref) >= 0.999, recall_at_k(ids, ref)
        assert np.all(np.diff(dist, axis=1) >= 0)
        assert np.allclose(dist, np.take_along_axis(full, ids, 1), rtol=1e-3, atol=1e-2)
    assert recall_at_k(np.array([[1, 2, -1]]), np.array([[2, 1, 3]])) == 2 / 3
    # List sizes by nearest centre (chunked as one), and the vectors a query's p nearest lists hold.
    cen = x[:50]
    sizes = nearest_list_sizes(np, x, cen, chunk=3001)
    assert sizes.sum() == len(x) and np.array_equal(sizes, np.bincount(
        (((x[:, None, :] - cen[None, :, :]) ** 2).sum(-1)).argmin(1), minlength=50))
    near = np.argsort(((q[:, None, :] - cen[None, :, :]) ** 2).sum(-1), axis=1)[:, :7]
    assert abs(scanned_per_query(np, cen, sizes, q, 7) - sizes[near].sum(1).mean()) < 1e-6
    assert scanned_per_query(np, cen, sizes, q, 50) == len(x)
    # The report, from a document shaped as run() writes it.
    doc = synthetic_doc()
    text = render(json.loads(json.dumps(doc)))
    for want in ("| 1m | search, batch 1, P32 | 0.260 ms | 0.077 ms | 3.38x |", "recall@10, P32", "first search in the "
                 "process", "build from NumPy", "prepare: small index", "| 10m | search, batch 10k, P32 | 97.3 ms",
                 "| 1m | vectors scanned a query, P32 | 40,100 | 37,240 | 1.08x |",
                 # udf at cuVS's P32 vectors: 0.94 + (40100 - 37240) / (46550 - 37240) * 0.02, and the same for
                 # the weighted L2: 0.93 + (40500 - 37300) / (46600 - 37300) * 0.02
                 "| 1m | recall@10 at cuVS's vectors scanned, P32 | 0.9300 | 0.9461 |  | 0.9200 | 0.9369 |  |"):
        assert want in text, (want, text)
    assert "cuVS's vectors scanned, P40" not in text  # cuVS's P40 reads more than udf's P40: no row
    assert recall_at_vectors([(10.0, 0.5), (20.0, 0.7)], 15.0) == 0.6
    assert recall_at_vectors([(10.0, 0.5), (20.0, 0.7)], 25.0) is None
    assert recall_at_vectors([(10.0, 0.5)], 10.0) is None
    print("cuvs_compare selftest: ok")


def synthetic_doc() -> dict:
    """A small hand-made result document (the --selftest's and the README's example)."""
    def cells(p, b, ms):
        return [{"system": s, "probes": p, "batch": b, "k": 10, "warmup_ms": [], "samples_ms": [v, v * 1.1, v * 0.9]}
                for s, v in zip(SYSTEMS, ms)]
    size1 = {"name": "1m", "rows": 1_000_000, "lists": 1024, "k": 10, "gen_s": 0.1, "truth_s": 0.3, "notes": [],
             "searches": cells(32, 1, [0.26, 0.077, 0.26, 0.086]) + cells(32, 100, [0.9, 0.35, 0.9, 0.4])
             + cells(32, 10000, [40.2, 7.8, 40.5, 11.5]),
             "recall": [{"system": s, "probes": p, "queries": 1000, "recall": v}
                        for p, vals in ((32, [0.93, 0.94, 0.92, 0.93]), (40, [0.95, 0.96, 0.94, 0.95]))
                        for s, v in zip(SYSTEMS, vals)],
             "scanned": [{"system": s, "probes": p, "queries": 1000, "per_query": v}
                         for p, vals in ((32, [40100.0, 37240.0, 40500.0, 37300.0]),
                                         (40, [50100.0, 46550.0, 50600.0, 46600.0]))
                         for s, v in zip(SYSTEMS, vals)],
             "builds": [{"system": "cuvs_l2", "source": "cupy", "samples_s": [0.24, 0.31, 0.26], "first_search_ms": [40, 36],
                         "process_first_ms": 524.0, "first_search_batch": 1, "first_search_probes": 32},
                        {"system": "udf_l2", "source": "cupy", "samples_s": [3.2, 3.3, 3.25], "first_search_ms": [1.9, 1.8,
                                                                                                               2.0],
                         "first_search_batch": 1, "first_search_probes": 32},
                        {"system": "cuvs_wl2", "source": "cupy", "samples_s": [0.25], "first_search_ms": [50],
                         "first_search_batch": 1, "first_search_probes": 32},
                        {"system": "udf_wl2", "source": "cupy", "samples_s": [3.3], "first_search_ms": [1.9],
                         "first_search_batch": 1, "first_search_probes": 32},
                        {"system": "cuvs_l2", "source": "numpy", "samples_s": [0.9]},
                        {"system": "udf_l2", "source": "numpy", "samples_s": [0.7]}],
             "prepare_s": {"cuvs_l2": 0.05, "udf_l2": 0.4, "cuvs_wl2": 0.01, "udf_wl2": 0.6}}
    size10 = {"name": "10m", "rows": 10_000_000, "lists": 4096, "k": 10, "gen_s": 0.8, "truth_s": 2.0,
              "notes": ["host builds skipped (example)"],
              "searches": cells(32, 10000, [97.3, 18.3, 97.0, 22.0]), "recall": [],
              "builds": [{"system": s, "source": "cupy", "samples_s": [v], "first_search_ms": [f],
                          "first_search_batch": 1, "first_search_probes": 32}
                         for s, v, f in zip(SYSTEMS, [1.97, 15.6, 2.0, 15.8], [36, 2.0, 40, 2.1])]}
    return {"schema": SCHEMA, "created": "2026-11-28 12:00:00 UTC", "commit": "d1128d6",
            "machine": {"gpu": "NVIDIA H200", "driver_api": 13000, "driver_release": "580.159.04"},
            "versions": {"cuvs": "26.10.00", "udf": "0.1.0", "cupy": "14.2.0", "numpy": "2.5.2",
                         "nvidia-nvjitlink": "13.5.37", "python": "3.12.3"},
            "config": {"dim": 128, "clusters": 1024, "spread": 0.92, "k": 10, "reps": 0, "warmup": 4, "evict_mb": 256,
                       "cuvs_resources": "shared", "cuvs_mr": "default", "udf_monotone": True},
            "sizes": [size1, size10]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.selftest:
        selftest()
        return 0
    if args.report:
        print(render(json.loads(args.report.read_text())), end="")
        return 0
    doc = run(args)
    print(render(doc), end="")
    return 0 if not doc.get("incomplete") else 1


if __name__ == "__main__":
    sys.exit(main())
