#!/usr/bin/env python3
"""Cold udfc + udf-link of two builds, alternately: A, B, A, B, ... on one machine.

toolchain_bench.py times one build's rows after the other's; on a shared host
whose speed drifts over minutes (the 2-core CI machine: the same link 1.4-2.0 s
from one minute to the next) that order decides more than the builds do.  This
runs each row's cold link for both builds in turn, REPS times, and prints the
medians of wall and CPU (user + system of the child processes) time, and their
ratios, as a Markdown table.

    bench/toolchain_ab.py --a OLD_BUILD --b NEW_BUILD [--reps 5] [--rows l2:90:32,l2:80,90,100,120:32]

A row is METRIC:ARCHS:MAX_K[:exact] (MAX_K 0: every bucket; exact: the rows
entries too, udf-link --exact, what exact search and refine link); METRIC is an
example (examples/METRIC.cu, weighted_l2 declared monotone as in toolchain_bench.py).

--hit times cache hits instead: each build gets a cache folder of its own,
filled by one untimed run, then every timed run of udfc + udf-link is a hit
(the CLI's "cache hit" rows; use --reps 30 or more: they take milliseconds).
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(cmd, env=None):
    """(wall s, child CPU s) of one command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit("toolchain_ab: %s failed:\n%s" % (" ".join(cmd), p.stderr))
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def udfc_args(metric):
    src = os.path.join(ROOT, "examples", metric + ".cu")
    extra = ["--capture", "weights:f32[]", "--monotone"] if metric == "weighted_l2" else []
    return [src] + extra


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="a build folder (bin/, share/udf/kernels)")
    ap.add_argument("--b", required=True, help="another build folder")
    ap.add_argument("--a-label", default="A")
    ap.add_argument("--b-label", default="B")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--hit", action="store_true", help="time cache hits (a cache folder per build) instead of cold runs")
    ap.add_argument("--rows", default="l2:90:32,l2:80,90,100,120:32,weighted_l2:90:32,l2:90:0")
    a = ap.parse_args()

    # "l2:80,90,100,120:32" splits on ',' too: a row starts at each METRIC: head.
    rows = []
    parts, cur = [], None
    for tok in a.rows.split(","):
        if ":" in tok and tok.split(":")[0] and not tok.split(":")[0].isdigit():
            if cur:
                parts.append(cur)
            cur = tok
        else:
            cur += "," + tok
    parts.append(cur)
    for p in parts:
        metric, archs, max_k, *flags = p.split(":")
        if flags not in ([], ["exact"]):
            sys.exit("toolchain_ab: row %s: expected METRIC:ARCHS:MAX_K[:exact]" % p)
        rows.append((metric, ["sm_" + x for x in archs.split(",")], int(max_k), bool(flags)))

    env_note = "%d CPUs, load %.2f at start" % (os.cpu_count(), os.getloadavg()[0])
    results = []
    with tempfile.TemporaryDirectory() as d:
        for metric, archs, max_k, exact in rows:
            t = {"a": [], "b": []}
            for rep in range(-1 if a.hit else 0, a.reps):  # --hit: rep -1 fills the caches, untimed
                for side, build in (("a", a.a), ("b", a.b)):
                    art = os.path.join(d, "%s_%s.udfa" % (metric, side))
                    mod = os.path.join(d, "%s_%s.udfm" % (metric, side))
                    env = dict(os.environ, UDF_CACHE_DIR=os.path.join(d, "cache_" + side)) if a.hit else None
                    cache = [] if a.hit else ["--no-cache"]
                    c = timed([os.path.join(build, "bin", "udfc")] + udfc_args(metric) +
                              ["--arch", ",".join(archs)] + cache + ["-o", art], env)
                    link = [os.path.join(build, "bin", "udf-link"), art, "--arch", ",".join(archs)] + cache + [
                            "--kernel-pack", os.path.join(build, "share", "udf", "kernels"), "-o", mod]
                    if max_k:
                        link += ["--max-k", str(max_k)]
                    if exact:
                        link += ["--exact"]
                    l = timed(link, env)
                    if rep >= 0:
                        t[side].append((c[0] + l[0], c[1] + l[1]))
            med = {s: (statistics.median(w for w, _ in v), statistics.median(u for _, u in v)) for s, v in t.items()}
            results.append((metric, archs, max_k, exact, med))
            sys.stderr.write("toolchain_ab: %s %s k<=%s%s: %s %.2f s (cpu %.2f), %s %.2f s (cpu %.2f)\n" % (
                metric, ",".join(archs), max_k or "all", " --exact" if exact else "", a.a_label, med["a"][0], med["a"][1], a.b_label, med["b"][0],
                med["b"][1]))
    unit, scale, fmt_ = ("ms", 1e3, "%.1f") if a.hit else ("s", 1.0, "%.2f")
    print("| metric | archs | entries | %s wall | %s wall | ratio | %s CPU | %s CPU | ratio |" % (
        a.a_label, a.b_label, a.a_label, a.b_label))
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    cell = lambda v: (fmt_ % (v * scale)) + " " + unit  # noqa: E731
    for metric, archs, max_k, exact, med in results:
        cpu_ratio = med["b"][1] / med["a"][1] if med["a"][1] else float("nan")
        entries = ("k <= %d" % max_k if max_k else "all buckets") + (", with the rows entries" if exact else "")
        print("| %s | %s | %s | %s | %s | %.2f | %s | %s | %.2f |" % (
            metric, ",".join(x[3:] for x in archs), entries, cell(med["a"][0]),
            cell(med["b"][0]), med["b"][0] / med["a"][0], cell(med["a"][1]), cell(med["b"][1]), cpu_ratio))
    how = "cache hits (a cache folder per build)" if a.hit else "cold (--no-cache)"
    print("\nudfc + udf-link, %s, median of %d alternated runs each; %s." % (how, a.reps, env_note))


if __name__ == "__main__":
    main()
