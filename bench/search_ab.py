#!/usr/bin/env python3
"""The search bench's A/B table: two builds' search_bench JSON files (bench/device_bench.sh
writes search_base_{1,2}.json and search_new_{1,2}.json, runs of one GPU, one beside the other)
side by side, row by row, and the ratio of the means.

    bench/search_ab.py DIR [--base search_base] [--new search_new] [--out FILE.md]

Exits 1 when a row of one build is missing in the other (a benchmark that silently lost a row
would otherwise compare nothing).
"""
import argparse
import glob
import json
import os
import sys


def load(dir_, stem):
    runs = []
    for path in sorted(glob.glob(os.path.join(dir_, stem + "_*.json"))):
        with open(path) as f:
            d = json.load(f)
        runs.append({(r["metric"], r["arrays"], r["batch"], r["n_probes"], r["k"]): r["median_ms"]
                     for r in d["results"]})
    if not runs:
        sys.exit("search_ab: no %s_*.json in %s" % (stem, dir_))
    return runs, d.get("device", "?")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--base", default="search_base")
    ap.add_argument("--new", default="search_new")
    ap.add_argument("--out")
    a = ap.parse_args()
    base, device = load(a.dir, a.base)
    new, _ = load(a.dir, a.new)
    keys = sorted(set().union(*base, *new))
    lines = ["| metric | k | batch | n_probes | before (ms), each run | after (ms), each run | after / before |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    missing, worst = [], 0.0
    for key in keys:
        b = [r[key] for r in base if key in r]
        n = [r[key] for r in new if key in r]
        if len(b) != len(base) or len(n) != len(new):
            missing.append(key)
            continue
        ratio = (sum(n) / len(n)) / (sum(b) / len(b))
        worst = max(worst, ratio)
        metric, arrays, batch, probes, k = key
        name = metric + (" (device arrays)" if arrays == "device" else "")
        lines.append("| %s | %d | %d | %d | %s | %s | %.3f |" % (
            name, k, batch, probes, " / ".join("%.3f" % x for x in b), " / ".join("%.3f" % x for x in n), ratio))
    lines.append("")
    lines.append("%s; %d runs of each build; worst after / before: %.3f." % (device, len(base), worst))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if missing:
        sys.exit("search_ab: rows missing in some run: %s" % ", ".join(map(str, missing)))


if __name__ == "__main__":
    main()
