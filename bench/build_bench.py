#!/usr/bin/env python3
"""udf.Index.build from the package on one GPU: the wall time of a build from a CuPy array
(device) and from the same rows as a NumPy array (host), against the C API figure search_bench
prints for host rows (issue 49: a build from CuPy or torch no slower than the C API from host
memory).

Data: cuvs_compare's overlap mixture (search_bench's, 1024 centres, spread 0.92), made with CuPy;
the built-in L2 (udf.builtin_metric("sqeuclidean")), default build parameters, the module linked
before the clock starts (a build of 4096 rows).  Each build is timed `--reps` times (median
printed, every sample in the JSON); the index's recall is not measured here (search_bench and
cuvs_compare do that).

    python3 bench/build_bench.py [--sizes 1m,10m] [--reps 3] [--json OUT.json]    # on the GPU machine
    python3 bench/build_bench.py --selftest                                       # anywhere

Needs cupy, numpy and the udf package.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cuvs_compare  # noqa: E402  (the data generator, shared)

SIZES = {"1m": (1_000_000, 1024), "10m": (10_000_000, 4096)}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1m,10m", help="comma-separated: 1m, 10m")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--seed", type=int, default=20261128)
    ap.add_argument("--json", help="write every sample here")
    ap.add_argument("--selftest", action="store_true", help="check the argument handling and the table (no GPU)")
    a = ap.parse_args(argv)
    a.sizes = [s.strip() for s in a.sizes.split(",") if s.strip()]
    bad = [s for s in a.sizes if s not in SIZES]
    if bad or not a.sizes:
        ap.error(f"--sizes: expected some of {', '.join(SIZES)}, got {a.sizes}")
    if a.reps < 1:
        ap.error("--reps must be at least 1")
    return a


def render(rows: list[dict]) -> str:
    lines = ["| rows x dim | lists | from | build s (median) | samples |", "|---|---:|---|---:|---|"]
    for r in rows:
        lines.append(f"| {r['rows']:,} x {r['dim']} | {r['lists']} | {r['source']} | {statistics.median(r['s']):.2f} | "
                     + ", ".join(f"{x:.2f}" for x in r["s"]) + " |")
    return "\n".join(lines)


def run(a: argparse.Namespace) -> list[dict]:
    import cupy as cp
    import udf

    metric = udf.builtin_metric("sqeuclidean")
    rows_out = []
    with cp.cuda.Device(a.device):
        centres = cuvs_compare.make_centres(cp, 1024, a.dim, a.seed)
        warm = cuvs_compare.draw(cp, centres, 4096, 0.92, a.seed + 1)
        udf.Index.build(metric, warm, n_lists=16)  # the module linked, the runtime started
        for name in a.sizes:
            n, lists = SIZES[name]
            x = cuvs_compare.draw(cp, centres, n, 0.92, a.seed + 2)
            cp.cuda.Device(a.device).synchronize()
            x_host = cp.asnumpy(x)
            for source, data in (("CuPy (device)", x), ("NumPy (host)", x_host)):
                samples = []
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    index = udf.Index.build(metric, data, n_lists=lists)
                    samples.append(time.perf_counter() - t0)
                    del index
                rows_out.append({"rows": n, "dim": a.dim, "lists": lists, "source": source, "s": samples})
                print(render(rows_out[-1:]).splitlines()[-1], flush=True)
            del x, x_host
    return rows_out


def selftest() -> None:
    a = parse_args(["--sizes", "1m", "--reps", "2"])
    assert a.sizes == ["1m"] and a.reps == 2
    for bad in (["--sizes", "2m"], ["--reps", "0"]):
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                parse_args(bad)
        except SystemExit:
            continue
        raise AssertionError(f"accepted {bad}")
    table = render([{"rows": 1_000_000, "dim": 128, "lists": 1024, "source": "CuPy (device)", "s": [0.5, 0.3, 0.4]}])
    assert "| 1,000,000 x 128 | 1024 | CuPy (device) | 0.40 | 0.50, 0.30, 0.40 |" in table, table
    print("build_bench selftest: ok")


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.selftest:
        selftest()
        return 0
    rows = run(a)
    print(render(rows))
    if a.json:
        Path(a.json).write_text(json.dumps({"schema": "build_bench/1", "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
