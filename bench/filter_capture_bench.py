#!/usr/bin/env python3
"""What a filter's declaration-time array capture costs a search, in one process on one GPU (issue 49).

One index a size (the built-in squared L2 over `overlap`-family data: bench/cuvs_compare.py's
Gaussian mixture, generated on the GPU with CuPy), ids 0 .. N-1, with a Python filter linked in
at the build:

    @udf.filter(captures={"allowed": mask})          # mask: N uint8 of 0 / 1, a NumPy array
    def fcb_keep(query, id, ctx):
        return ctx.allowed[id] != 0

(--keep of the ids kept, at random, default 0.5).  Each (size, batch) cell times four searches
of the same index, k 10, n_probes --probes, in turns (the order rotates by repetition):

  unfiltered        index.search(q)
  declared NumPy    index.search(q, filter=fcb_keep): the mask given at declaration.  The index
                    copies it to the GPU at its first search (a udf._ext.DeviceArray) and binds
                    that copy afterwards: what this bench is for (docs/python.md, "When array
                    captures reach the GPU")
  CuPy per search   index.search(q, filter=fcb_keep, filter_captures={"allowed": mask_cupy}): the
                    same values as a device array, read in place
  NumPy per search  index.search(q, filter=fcb_keep, filter_captures={"allowed": mask}): a host
                    array given to the search, which the runtime compares byte by byte with the
                    last upload at every search (--no-numpy-per-search leaves it out)

Method: CuPy device queries (--host-queries: NumPy), a fresh query (batch 1) or batch each
repetition from a pool drawn from the same mixture; --warmup searches of each system first (the
first of each is reported apart: it includes the on-demand link of the filtered scan, and for
"declared NumPy" the copy of the mask); then --reps timed repetitions (default 200 at batch 1, 10
above), each a device synchronize, time.perf_counter around the call and a synchronize after
it; --evict-mb writes a buffer before each search to evict L2 (default 0: none).  Reported: the
median, and the ratio of each filtered search to the unfiltered one.  The target of issue 49:
at batch 1 "declared NumPy" costs at most 1.3x "unfiltered".

Checks (in the JSON and under the table; a failed check makes the exit status 1): the three
filtered searches return the same ids and distances (bit for bit) on 100 queries; every id they
return is kept by the mask; after every search the index holds one device copy (the declared
mask, N bytes).

    python3 bench/filter_capture_bench.py --json OUT.json            # on the GPU machine: 2m, 20m
    python3 bench/filter_capture_bench.py --sizes 2m --batches 1      # a quick look
    python3 bench/filter_capture_bench.py --report OUT.json           # the table again, anywhere
    python3 bench/filter_capture_bench.py --selftest                  # anywhere (NumPy only)

Needs on the GPU machine: cupy, numpy and the `udf` package (its wheel: udfc, udf-link and
NVRTC for the Python filter).  Time on an H200 (estimated, not measured): about 2 minutes for
2m and 20m at dim 128 (the 20M build dominates), well inside one 10-minute device call.
"""
from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuvs_compare import (Run, draw, fmt_ms, fmt_ratio, int_list, make_centres, md_table, median,  # noqa: E402
                          nvidia_smi, source_commit)
from cuvs_compare import parse_sizes as cuvs_compare_parse_sizes  # noqa: E402

SCHEMA = "filter_capture_bench/1"
SIZES = {"2m": (2_000_000, 2048), "20m": (20_000_000, 8192)}
SYSTEMS = ("unfiltered", "declared_numpy", "cupy_per_search", "numpy_per_search")
LABELS = {"unfiltered": "unfiltered", "declared_numpy": "filtered, declared NumPy",
          "cupy_per_search": "filtered, CuPy per search", "numpy_per_search": "filtered, NumPy per search"}
TARGET = 1.3  # declared NumPy / unfiltered at batch 1 (issue 49)
CHECK_QUERIES = 100


# ---------------------------------------------------------------- options

def parse_sizes(text: str) -> list[dict]:
    """'2m,20m' (2M ids in 2048 lists, 20M in 8192) or ROWS:LISTS items (cuvs_compare's parser)."""
    return cuvs_compare_parse_sizes(text, SIZES)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="The module docstring (and bench/README.md) describes the method.")
    g = p.add_argument_group("what to run")
    g.add_argument("--sizes", type=parse_sizes, default=parse_sizes("2m,20m"),
                   help="comma-separated: 2m (2M ids, 2048 lists), 20m (20M ids, 8192 lists) or ROWS:LISTS "
                        "(default 2m,20m)")
    g.add_argument("--dim", type=int, default=128, help="vector dimension (default 128)")
    g.add_argument("--clusters", type=int, default=1024, help="mixture centres (default 1024)")
    g.add_argument("--spread", type=float, default=0.92, help="Gaussian spread around each centre (default 0.92)")
    g.add_argument("--keep", type=float, default=0.5, help="fraction of the ids the mask keeps (default 0.5)")
    g.add_argument("--k", type=int, default=10, help="neighbours per query (default 10)")
    g.add_argument("--probes", type=int, default=32, help="n_probes (default 32)")
    g.add_argument("--batches", type=int_list, default=[1, 10000], help="batch sizes (default 1,10000)")
    g.add_argument("--reps", type=int, default=0, help="timed repetitions per cell (default 0: 200 at batch 1, "
                                                        "10 above)")
    g.add_argument("--warmup", type=int, default=5, help="warm-up searches per cell and system (default 5)")
    g.add_argument("--evict-mb", type=int, default=0, help="L2 eviction buffer written before each search, MB "
                                                            "(default 0: none)")
    g.add_argument("--host-queries", action="store_true", help="NumPy queries (host outputs) instead of CuPy")
    g.add_argument("--no-numpy-per-search", action="store_true",
                   help="leave out the NumPy mask given to each search (the slow per-search host path)")
    g.add_argument("--seed", type=int, default=49, help="seed of the data, queries and mask (default 49)")
    g.add_argument("--device", type=int, default=0, help="CUDA device (default 0)")
    o = p.add_argument_group("output")
    o.add_argument("--json", type=Path, help="write every sample and the machine here (rewritten after each size)")
    o.add_argument("--commit", help="the commit measured (default $UDF_BENCH_COMMIT, else git rev-parse, else unknown)")
    o.add_argument("--report", type=Path, metavar="JSON", help="print the table of a saved JSON and exit (no GPU)")
    o.add_argument("--selftest", action="store_true", help="check the CPU parts with NumPy and exit (no GPU)")
    a = p.parse_args(argv)
    for name in ("dim", "clusters", "k", "probes"):
        if getattr(a, name) <= 0:
            p.error(f"--{name} must be positive")
    if not 0.0 < a.keep <= 1.0:
        p.error("--keep must be in (0, 1]")
    if a.reps < 0 or a.warmup < 1 or a.evict_mb < 0 or a.spread <= 0:
        p.error("--reps and --evict-mb must be >= 0, --warmup >= 1, --spread > 0")
    if a.probes > min(s["lists"] for s in a.sizes):
        p.error(f"--probes {a.probes} exceeds the lists of a size")
    return a


def reps_for(batch: int, override: int) -> int:
    return override or (200 if batch == 1 else 10)


def systems_of(a: argparse.Namespace) -> tuple[str, ...]:
    return tuple(s for s in SYSTEMS if not (s == "numpy_per_search" and a.no_numpy_per_search))


def make_mask(rows: int, keep: float, seed: int) -> np.ndarray:
    """rows uint8 of 0 / 1, each 1 with probability `keep` (host)."""
    return (np.random.default_rng([seed, 11]).random(rows) < keep).astype(np.uint8)


# ---------------------------------------------------------------- checks (NumPy)

def check_results(results: dict[str, tuple[np.ndarray, np.ndarray]], mask: np.ndarray) -> dict:
    """The filtered systems' (distances, ids) on the same queries: equal bit for bit, and every
    returned id (not padding, -1) kept by the mask."""
    names = [s for s in results if s != "unfiltered"]
    first = names[0]
    d0, i0 = results[first]
    same = all(np.array_equal(results[s][1], i0) and np.array_equal(results[s][0].view(np.uint32), d0.view(np.uint32))
               for s in names[1:])
    kept = True
    for s in names:
        ids = results[s][1]
        got = ids[ids >= 0]
        kept = kept and bool(np.all(mask[got] == 1))
    return {"filtered_results_equal": bool(same), "returned_ids_kept": kept, "compared": names}


# ---------------------------------------------------------------- report

def cell(size: dict, system: str, batch: int) -> dict | None:
    return next((c for c in size.get("searches", []) if c["system"] == system and c["batch"] == batch), None)


def size_rows(size: dict, systems: tuple[str, ...]) -> list[list[str]]:
    rows = []
    for b in sorted({c["batch"] for c in size.get("searches", [])}):
        base = median((cell(size, "unfiltered", b) or {}).get("samples_ms", []))
        vals = []
        for s in systems:
            m = median((cell(size, s, b) or {}).get("samples_ms", []))
            vals.append(fmt_ms(m) if s == "unfiltered" else f"{fmt_ms(m)} ({fmt_ratio(m, base)})")
        rows.append([size["name"], f"search, batch {b:,}", *vals])
    if size.get("searches"):
        b0 = min(c["batch"] for c in size["searches"])
        first = [(lambda c: fmt_ms(c["first_ms"]) if c and c.get("first_ms") is not None else "-")(cell(size, s, b0))
                 for s in systems]
        rows.append([size["name"], f"first search, batch {b0:,} (on-demand links; declared: + its copy)", *first])
    return rows


def target_line(size: dict) -> str:
    base = median((cell(size, "unfiltered", 1) or {}).get("samples_ms", []))
    dec = median((cell(size, "declared_numpy", 1) or {}).get("samples_ms", []))
    if base is None or dec is None:
        return f"- {size['name']}: no batch-1 cells"
    r = dec / base
    return (f"- {size['name']}: batch 1, declared NumPy / unfiltered = {r:.2f}x: target <= {TARGET}x "
            f"{'met' if r <= TARGET else 'MISSED'}")


def check_lines(size: dict) -> list[str]:
    c = size.get("checks") or {}
    if not c:
        return [f"- {size['name']}: no checks recorded"]
    bad = [k for k, v in c.items() if v is False]
    return [f"- {size['name']} checks: " + ", ".join(f"{k} {'ok' if v is True else v}" for k, v in c.items()
                                                     if k != "compared")
            + (f" -- FAILED: {', '.join(bad)}" if bad else "")]


def render(doc: dict) -> str:
    m, c = doc.get("machine", {}), doc.get("config", {})
    systems = tuple(doc.get("systems", SYSTEMS))
    lines = [f"# A filter's declaration-time capture: search cost ({doc.get('created', '?')})", "",
             f"GPU: {m.get('gpu', '?')}, driver {m.get('driver_release') or m.get('driver_api', '?')}; commit "
             f"{doc.get('commit', '?')}; udf {doc.get('versions', {}).get('udf', '?')}, cupy "
             f"{doc.get('versions', {}).get('cupy', '?')}.",
             f"Built-in squared L2, Gaussian mixture ({c.get('clusters', '?')} centres, spread "
             f"{c.get('spread', '?')}), "
             f"dim {c.get('dim', '?')}, ids 0 .. N-1; filter `ctx.allowed[id] != 0` over a uint8 mask of N ids keeping "
             f"{c.get('keep', '?')}; k {c.get('k', '?')}, n_probes {c.get('probes', '?')}; "
             f"{'NumPy' if c.get('host_queries') else 'CuPy'} queries; median of "
             f"{c.get('reps', 0) or '200 (batch 1) / 10'} repetitions after {c.get('warmup', '?')} warm-ups"
             f"{', L2 evicted before each' if c.get('evict_mb') else ''}. In parentheses: time / unfiltered time.", ""]
    for s in doc.get("sizes", []):
        kept = f"{s['kept']:,}" if isinstance(s.get("kept"), int) else "?"
        lines.append(f"- {s['name']}: {s['rows']:,} ids, {s['lists']} lists; data {s.get('gen_s', 0):.1f} s, build "
                     f"{s.get('build_s', 0):.1f} s; mask {s['rows']:,} bytes, {kept} kept")
    if doc.get("incomplete"):
        lines.append(f"- incomplete run: {doc['incomplete']}")
    rows = [r for s in doc.get("sizes", []) for r in size_rows(s, systems)]
    lines += ["", md_table(["size", "measure", *[LABELS[s] for s in systems]], rows, 2), ""]
    for s in doc.get("sizes", []):
        lines.append(target_line(s))
        lines += check_lines(s)
    return "\n".join(lines) + "\n"


def failed(doc: dict) -> bool:
    return bool(doc.get("incomplete")) or any(v is False for s in doc.get("sizes", [])
                                               for v in (s.get("checks") or {}).values())


# ---------------------------------------------------------------- the GPU run

def declare_filter(udf, mask: np.ndarray):
    """The bench's filter, declared with `mask` (NumPy) as its default."""

    @udf.filter(captures={"allowed": mask}, symbol_name="fcb_keep")
    def fcb_keep(query, id, ctx):  # noqa: A002 (the ABI's name)
        return ctx.allowed[id] != 0

    return fcb_keep


def run(args: argparse.Namespace) -> dict:
    import cupy as cp
    import udf

    a = args
    r = Run(a)
    cp.cuda.Device(a.device).use()
    props = cp.cuda.runtime.getDeviceProperties(a.device)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    config = {k: (v if not isinstance(v, Path) else str(v)) for k, v in vars(a).items()
              if k not in ("json", "report", "selftest", "sizes")}
    config["sizes"] = a.sizes
    r.doc = {"schema": SCHEMA, "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "commit": source_commit(a.commit),
             "command": " ".join(sys.argv), "systems": list(systems_of(a)),
             "machine": {"gpu": name, "device": a.device, "driver_api": cp.cuda.runtime.driverGetVersion(),
                         "host": platform.node(), **nvidia_smi()},
             "versions": {"udf": udf.__version__, "cupy": cp.__version__, "numpy": np.__version__,
                          "python": platform.python_version()},
             "config": config, "sizes": []}
    r.log(f"{name}; udf {udf.__version__}, cupy {cp.__version__}")
    metric = udf.builtin_metric("sqeuclidean")
    for size in a.sizes:
        out = {"name": size["name"], "rows": size["rows"], "lists": size["lists"], "searches": []}
        r.doc["sizes"].append(out)
        try:
            run_size(r, size, out, cp=cp, udf=udf, metric=metric)
        except Exception as exc:  # noqa: BLE001 (kept in the document, then raised)
            r.doc["incomplete"] = f"size {size['name']}: {type(exc).__name__}: {exc}"
            r.save()
            raise
        gc.collect()
        cp.get_default_memory_pool().free_all_blocks()
        r.save()
    r.doc["wall_s"] = r.elapsed()
    r.save()
    return r.doc


def run_size(r: Run, size: dict, out: dict, *, cp, udf, metric) -> None:
    a = r.args
    rows, lists = size["rows"], size["lists"]
    sync = cp.cuda.Device(a.device).synchronize
    t = time.perf_counter()
    centres = make_centres(cp, a.clusters, a.dim, a.seed)
    data = draw(cp, centres, rows, a.spread, a.seed + 1)
    mask = make_mask(rows, a.keep, a.seed)
    mask_cp = cp.asarray(mask)
    sync()
    out["gen_s"], out["kept"] = time.perf_counter() - t, int(mask.sum())
    keep = declare_filter(udf, mask)
    r.log(f"{size['name']}: data {out['gen_s']:.1f} s; building {rows:,} x {a.dim} in {lists} lists")
    t = time.perf_counter()
    index = udf.Index.build(metric, data, n_lists=lists, seed=a.seed, filters=[keep])
    sync()
    out["build_s"] = time.perf_counter() - t
    del data
    r.log(f"{size['name']}: built in {out['build_s']:.1f} s")
    search = {
        "unfiltered": lambda q: index.search(q, k=a.k, n_probes=a.probes),
        "declared_numpy": lambda q: index.search(q, k=a.k, n_probes=a.probes, filter=keep),
        "cupy_per_search": lambda q: index.search(q, k=a.k, n_probes=a.probes, filter=keep,
                                                  filter_captures={"allowed": mask_cp}),
        "numpy_per_search": lambda q: index.search(q, k=a.k, n_probes=a.probes, filter=keep,
                                                   filter_captures={"allowed": mask}),
    }
    systems = systems_of(a)
    evict = cp.zeros(a.evict_mb << 20, dtype=cp.uint8) if a.evict_mb else None
    for batch in a.batches:
        reps = reps_for(batch, a.reps)
        pool = draw(cp, centres, batch * (a.warmup + reps), a.spread, a.seed + 1000 + batch)
        if a.host_queries:
            pool = cp.asnumpy(pool)
        cells = {s: {"system": s, "batch": batch, "first_ms": None, "warmup_ms": [], "samples_ms": []}
                 for s in systems}
        for i in range(a.warmup + reps):
            q = pool[i * batch:(i + 1) * batch]
            for j in range(len(systems)):
                s = systems[(i + j) % len(systems)]
                if evict is not None:
                    evict.fill(i & 0xFF)
                sync()
                t = time.perf_counter()
                search[s](q)
                sync()
                ms = (time.perf_counter() - t) * 1000.0
                c = cells[s]
                if c["first_ms"] is None:
                    c["first_ms"] = ms
                (c["warmup_ms"] if i < a.warmup else c["samples_ms"]).append(ms)
        out["searches"] += list(cells.values())
        r.log(f"{size['name']}: batch {batch}: " + ", ".join(f"{s} {median(cells[s]['samples_ms']):.3f} ms"
                                                             for s in systems))
        del pool
        r.save()
    out["checks"] = size_checks(cp, index, search, systems, centres, mask, a)
    r.log(f"{size['name']}: checks {out['checks']}")


def size_checks(cp, index, search, systems, centres, mask: np.ndarray, a: argparse.Namespace) -> dict:
    """check_results over CHECK_QUERIES queries, and the index's device copies: one, of the mask."""
    q = draw(cp, centres, CHECK_QUERIES, a.spread, a.seed + 7)
    results = {}
    for s in systems:
        if s == "unfiltered":
            continue
        d, i = search[s](q)
        results[s] = (cp.asnumpy(d), cp.asnumpy(i))
    checks = check_results(results, mask)
    copies = getattr(index, "_copies", None)
    kept = list(getattr(copies, "_copies", {}).values()) if copies is not None else []
    checks["one_device_copy"] = len(kept) == 1
    checks["device_copy_bytes"] = int(kept[0][1].value.nbytes) if len(kept) == 1 else None
    checks["device_copy_is_the_mask"] = checks["device_copy_bytes"] == mask.size
    return checks


# ---------------------------------------------------------------- self-test (CPU)

def synthetic_doc() -> dict:
    """A small hand-made result document (the --selftest's)."""
    def cells(b, ms, first=None):
        return [{"system": s, "batch": b, "first_ms": (first or {}).get(s), "warmup_ms": [],
                 "samples_ms": [v * 0.9, v, v * 1.2]} for s, v in zip(SYSTEMS, ms)]
    ok = {"filtered_results_equal": True, "returned_ids_kept": True, "compared": list(SYSTEMS[1:]),
          "one_device_copy": True, "device_copy_bytes": 2_000_000, "device_copy_is_the_mask": True}
    s2 = {"name": "2m", "rows": 2_000_000, "lists": 2048, "gen_s": 0.2, "build_s": 4.1, "kept": 1_000_123,
          "searches": cells(1, [0.060, 0.070, 0.068, 0.82], {"declared_numpy": 35.0, "unfiltered": 0.4})
          + cells(10000, [7.5, 9.0, 9.1, 9.4]), "checks": ok}
    s20 = {"name": "20m", "rows": 20_000_000, "lists": 8192, "gen_s": 1.5, "build_s": 33.0, "kept": 9_999_321,
           "searches": cells(1, [0.100, 0.140, 0.120, 10.6]),
           "checks": {**ok, "device_copy_bytes": 19_999_999, "device_copy_is_the_mask": False}}
    return {"schema": SCHEMA, "created": "2026-11-29 12:00:00 UTC", "commit": "abc1234", "systems": list(SYSTEMS),
            "machine": {"gpu": "NVIDIA H200", "driver_release": "580.159.04"},
            "versions": {"udf": "0.1.0", "cupy": "14.2.0"},
            "config": {"dim": 128, "clusters": 1024, "spread": 0.92, "keep": 0.5, "k": 10, "probes": 32, "reps": 0,
                       "warmup": 5, "evict_mb": 0, "host_queries": False},
            "sizes": [s2, s20]}


def selftest() -> None:
    """The parts that need no GPU, with NumPy: options, the mask, the checks, the report."""
    a = parse_args([])
    assert [(s["name"], s["rows"], s["lists"]) for s in a.sizes] == [("2m", 2_000_000, 2048), ("20m", 20_000_000, 8192)]
    assert a.batches == [1, 10000] and systems_of(a) == SYSTEMS
    assert systems_of(parse_args(["--no-numpy-per-search"])) == SYSTEMS[:3]
    assert parse_args(["--sizes", "50000:64"]).sizes == [{"name": "50k", "rows": 50_000, "lists": 64}]
    assert reps_for(1, 0) == 200 and reps_for(10000, 0) == 10 and reps_for(1, 7) == 7
    m = make_mask(100_000, 0.5, 49)
    assert m.dtype == np.uint8 and set(np.unique(m)) <= {0, 1} and abs(m.mean() - 0.5) < 0.01
    assert np.array_equal(m, make_mask(100_000, 0.5, 49)) and make_mask(1000, 1.0, 1).all()
    # The checks: equal results pass; a changed distance bit, or an id the mask drops, fails.
    rng = np.random.default_rng(3)
    ids = rng.choice(np.flatnonzero(m), size=(5, 10)).astype(np.int64)
    ids[0, -1] = -1  # padding is never checked against the mask
    d = rng.random((5, 10)).astype(np.float32)
    res = {s: (d.copy(), ids.copy()) for s in SYSTEMS}
    c = check_results(res, m)
    assert c["filtered_results_equal"] and c["returned_ids_kept"] and c["compared"] == list(SYSTEMS[1:])
    res["cupy_per_search"][0][2, 3] = np.nextafter(d[2, 3], np.float32(2))
    assert not check_results(res, m)["filtered_results_equal"]
    res = {s: (d.copy(), ids.copy()) for s in SYSTEMS}
    res["numpy_per_search"][1][1, 1] = int(np.flatnonzero(m == 0)[0])
    assert not check_results(res, m)["returned_ids_kept"]
    # The report and the exit status, from a document shaped as run() writes it.
    doc = json.loads(json.dumps(synthetic_doc()))
    text = render(doc)
    for want in ("| 2m | search, batch 1 | 0.060 ms | 0.070 ms (1.17x) | 0.068 ms (1.13x) | 0.820 ms (13.7x) |",
                 "| 2m | search, batch 10,000 | 7.50 ms | 9.00 ms (1.20x) |", "| 20m | search, batch 1 | 0.100 ms |",
                 "first search, batch 1", "| 35.0 ms |", "- 2m: batch 1, declared NumPy / unfiltered = 1.17x: target "
                 "<= 1.3x met", "- 20m: batch 1, declared NumPy / unfiltered = 1.40x: target <= 1.3x MISSED",
                 "FAILED: device_copy_is_the_mask", "1,000,123 kept"):
        assert want in text, (want, text)
    assert failed(doc)
    doc["sizes"] = doc["sizes"][:1]
    assert not failed(doc) and "FAILED" not in render(doc)
    print("filter_capture_bench selftest: ok")


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
    return 1 if failed(doc) else 0


if __name__ == "__main__":
    sys.exit(main())
