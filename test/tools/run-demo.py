#!/usr/bin/env python3
"""Runs the demo's steps (scripts/demo-steps.sh) over a build and checks what it shows.

    run-demo.py SOURCE_DIR BUILD_DIR [--require-gpu]

The demo runs README's command-line quickstart (examples/cli/quickstart.sh):
it must exit 0 and print, in at most MAX_LINES lines, the artifact's manifest,
the module's archs and each entry kernel with its size; with a GPU, udf-run's
recall@10, at least MIN_RECALL; without one, the line saying why it did not
search (--require-gpu: that line fails the test).  Exit status 1 naming what
is missing, with the demo's output; otherwise 0.
"""
import json
import os
import re
import subprocess
import sys

MAX_LINES = 100
MIN_RECALL = 0.9
ARCHS = "sm_80, sm_90, sm_100, sm_120"
ENTRIES = [f"udf_ivf_scan_v1__weighted_l2__f32_f32_min_k{k}" for k in (32, 128, 256, 1024)] + \
          [f"udf_ivf_merge_v1_min_k{k}" for k in (32, 128, 256, 1024)]


def manifest_in(out):
    """The first JSON object printed alone from a line '{' to a line '}'."""
    m = re.search(r"^\{\n.*?^\}\n", out, re.M | re.S)
    return json.loads(m.group(0)) if m else None


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 2:
        sys.stderr.write("usage: run-demo.py SOURCE_DIR BUILD_DIR [--require-gpu]\n")
        return 2
    src, build = args
    env = dict(os.environ, UDF_BUILD_DIR=build)
    r = subprocess.run(["bash", os.path.join(src, "scripts", "demo-steps.sh")], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = r.stdout
    problems = []
    if r.returncode != 0:
        problems.append(f"scripts/demo-steps.sh exited {r.returncode}")
    lines = out.splitlines()
    if len(lines) > MAX_LINES:
        problems.append(f"the demo printed {len(lines)} lines (at most {MAX_LINES}: nothing to scroll past)")
    manifest = manifest_in(out)
    if not manifest or manifest.get("kind") != "udf.artifact" or manifest.get("symbol") != "weighted_l2":
        problems.append("no artifact manifest of weighted_l2 (udfc --inspect wl2.udfa)")
    if not re.search(rf"^  archs {ARCHS}; {len(ENTRIES)} entry kernels, [0-9.]+ MB of fatbins$", out, re.M):
        problems.append(f"no module line 'archs {ARCHS}; {len(ENTRIES)} entry kernels, ...'")
    for name in ENTRIES:
        if not re.search(rf"^ +[0-9]+ KB  {name}$", out, re.M):
            problems.append(f"no size line for the entry {name}")
    gpu = re.search(r"^recall@10: ([0-9.]+)$", out, re.M)
    no_gpu = "No GPU here: compiled and linked." in out
    if gpu:
        if float(gpu.group(1)) < MIN_RECALL:
            problems.append(f"recall@10 {gpu.group(1)} < {MIN_RECALL}")
    elif not no_gpu:
        problems.append("neither udf-run's recall@10 nor the line saying there is no GPU")
    elif "--require-gpu" in argv:
        problems.append("no GPU: the demo did not search (--require-gpu)")
    if problems:
        print(out)
        for p in problems:
            print(f"run-demo: {p}")
        return 1
    print(out)
    print(f"run-demo: ok ({len(lines)} lines, {'recall@10 ' + gpu.group(1) if gpu else 'no GPU: compiled and linked'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
